"""The terms the reports use, each explained once in plain words (a report lists the ones it
uses where the reader first meets them, and marks each use with its explanation)."""

from __future__ import annotations

GLOSSARY: dict[str, str] = {
    # qq
    "QQ equality": (
        "q = 0, where q = [P_AB(A yes, B no) + P_AB(A no, B yes)] - [P_BA(B yes, A no) + P_BA(B no, A yes)]: "
        "the two orders' mismatch probabilities agree. The projective question-order model "
        "predicts it; an item satisfies it when q lies within epsilon of 0 however the unassigned mass falls."
    ),
    "SATISFIED / VIOLATED / INDETERMINATE": (
        "The QQ verdict of an item, taken over the whole robustness envelope: SATISFIED when every "
        "allocation of the unassigned mass gives |q| <= epsilon, VIOLATED when every allocation gives "
        "|q| > epsilon, INDETERMINATE when the envelope straddles the margin."
    ),
    "envelope": (
        "The range of q (or Gamma) over every way the probability mass not on the answer labels "
        "(the 'other' mass) could be assigned; decisions are taken on it, so leaked mass can only widen it."
    ),
    "OSS": (
        "Order-sensitivity score |OE_A| + |OE_B|: how much each question's own yes-probability moves "
        "between asking it first and second."
    ),
    "Gamma": (
        "Gamma = |q| - OSS. Certified Gamma <= 0 (NONCONTEXTUAL) means the violation is compatible with "
        "order effects on the marginals; certified Gamma > 0 (CONTEXTUAL) certifies residual "
        "contextuality; bounds straddling 0 are INDETERMINATE."
    ),
    "saturated": (
        "An item whose answer distributions are near-deterministic (more than half of its positions "
        "put at least the saturation threshold, 0.99 by default, on one answer): it cannot show a "
        "distribution-level effect."
    ),
    "G1": "Gate G1: each answer label (A, B, Yes, No) is one token in the rendered chat context.",
    "G2": "Gate G2: the probability mass off the answer labels stays below 0.01 at every position.",
    "G3": (
        "Gate G3: pre-specified spot checks in which sampled answers agree with the log-probabilities "
        "(exact Clopper-Pearson intervals, Bonferroni-corrected)."
    ),
    "mapping": (
        "Which neutral label (A or B) stands for yes; counterbalanced runs measure both and pool them, "
        "so a label preference cannot pose as an order effect."
    ),
    # judge
    "P0 / PA / PB / PAB": (
        "The judge's presentation conditions: P0 shows both answers as they are; PA wraps only answer A "
        "in the boundary markers; PB only answer B; PAB both. The answers' text is never changed."
    ),
    "disagreement": (
        "A prompt whose winner label (A, B or TIE) under a condition differs from P0's; a change to or "
        "from TIE counts."
    ),
    "attraction / aversion": (
        "Descriptive patterns of the one-sided conditions: the wrapped answer wins more often "
        "(attraction) or less often (aversion) than under P0."
    ),
    # choir
    "RBO": (
        "Rank-biased overlap (p = 0.9) of two ranked lists: 1 for identical lists, 0 for disjoint ones; "
        "early ranks weigh most."
    ),
    "STC": (
        "Signal-to-chance: observed cross-model agreement divided by the agreement expected when each "
        "model's answers are shuffled across questions. Above 1: agreement beyond what shared "
        "vocabulary explains."
    ),
    "width": "A question's answer-space width: how many distinct concepts the models' lists cover.",
    "persona lift": (
        "Same-persona cross-model RBO divided by unconditioned cross-model RBO: how much giving the "
        "models the same respondent description makes their lists agree."
    ),
    "echo": "An answer that repeats words of the question (item echo) or of its cue (anchor echo).",
    # draws
    "R / E0 / T": (
        "R counts a sequence's adjacent repeated answers; E0 is R's exact expectation if every order of "
        "the same answers were equally likely; T sums R - E0 over a family's sequences."
    ),
    "Holm": "Holm's step-down correction of the families' p-values for testing several families at once.",
    "ρ̂ / ρ_upper": (
        "rho-hat estimates how often a draw repeats the previous one beyond chance; rho-upper is the "
        "largest persistence still compatible with the data (simulated)."
    ),
}


def explain(terms: list[str]) -> list[tuple[str, str]]:
    """``(term, explanation)`` for each of ``terms`` (KeyError for a term not in the glossary)."""
    return [(t, GLOSSARY[t]) for t in terms]
