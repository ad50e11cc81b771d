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
    "other mass": (
        "The next-token probability a position puts on tokens other than the answer labels. It belongs to "
        "neither answer; the envelope covers every way it could be assigned, so the more of it, the wider "
        "(less decisive) the envelope."
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
        "An item whose answer distributions are near-deterministic: more than half of its positions "
        "put more than the saturation threshold (0.99 by default) on one answer. Its QQ verdict is "
        "reported but says little about the answer distribution."
    ),
    "G1": "Gate G1: each answer label (A, B, Yes, No) is one token in the rendered chat context.",
    "G2": "Gate G2: the probability mass off the answer labels stays below 0.01 (by default) at every position.",
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
        "Descriptive patterns of the one-sided conditions, for a prompt and replicate where both PA and PB "
        "chose A or B: attraction when the wrapped answer wins under both (PA chooses A and PB chooses B), "
        "aversion when the unwrapped one does (PA chooses B and PB chooses A). P0 and PAB play no part."
    ),
    "SWAP": (
        "A further presentation condition: answers A and B exchanged, no wrapper. Its verdicts are mapped "
        "back to the original A/B orientation before they are compared with P0."
    ),
    "repeat baseline": (
        "The reference condition compared with itself: its replicate r against replicate r + 1 (r even, "
        "k of at least 2). How often the judge changes its verdict when nothing changed: the scale for "
        "the other comparisons."
    ),
    "prompt classes": (
        "Each prompt (per replicate) takes the first of these that holds: COMMON_WRAPPER_OR_REPEAT_UNSTABLE "
        "(PAB differs from P0), WRAPPER_ATTRACTION_PATTERN (PA = A and PB = B), WRAPPER_AVERSION_PATTERN "
        "(PA = B and PB = A), CONTENT_STABLE (P0 = PA = PB), else MIXED_OR_TIE; NOT_CLASSIFIABLE when the "
        "class depends on an invalid label."
    ),
    "log-prob readout": (
        "P(A), P(B) and P(TIE): the judge's next-token probabilities of the three labels after the judge "
        "prompt and one more turn asking for the label only; the rest of the mass goes to other tokens."
    ),
    "invalid output": (
        "A judge output not in the rubric's exact format (three lines: WINNER: A, B or TIE; CONFIDENCE: a "
        "number from 0 to 1; REASON: one sentence). It is kept raw, retried as configured, never given a "
        "label, and a pair with an invalid side is left out of the comparison."
    ),
    # judge, imported pairwise verdicts (FastChat, AlpacaEval)
    "order 1 / order 2": (
        "The two orders an imported pair can be judged in: order 1 (P0) shows answer A, the pair's first "
        "model, first; order 2 (SWAP) shows answer B first. Verdicts are mapped back to A and B before they "
        "are compared."
    ),
    "flipped pair": (
        "A pair judged in both orders whose winner changed with the order and went to the same position "
        "both times: the answer shown first won both times, or the answer shown second did. Without position "
        "bias half of them go each way."
    ),
    "imported invalid verdict": (
        "A verdict the tool itself recorded without a winner (FastChat: 'error', no [[A]], [[B]] or [[C]] "
        "found; AlpacaEval: no preference parsed). It is kept, never given a label, and a pair with an "
        "invalid side is left out."
    ),
    # choir
    "RBO": (
        "Rank-biased overlap (p = 0.9) of two ranked lists: 1 for identical lists, 0 for disjoint ones; "
        "early ranks weigh most."
    ),
    "STC": (
        "Signal-to-chance of a question: the mean cross-model RBO of the members' unconditioned concept "
        "rankings divided by its mean when the concepts are dealt out among the members at random (each "
        "list keeping its length). Above 1: the members agree more than the same concepts dealt at random would."
    ),
    "width": (
        "A question's answer-space width W_q = ln(1 + C_q) x (1 - min(R_q, 0.35) / 0.35): C_q counts the "
        "question's unconditioned concept clusters, R_q is its unconditioned mean cross-model RBO. 0 when "
        "the members agree strongly (R_q of 0.35 or more); larger for many concepts and little agreement."
    ),
    "persona lift": (
        "Same-persona cross-model RBO divided by unconditioned cross-model RBO: how much giving the "
        "models the same respondent description makes their lists agree."
    ),
    "echo": (
        "Echo rate: the share of a question's unconditioned items whose embedding lies within cosine "
        "distance 0.2 of a word of the question (they repeat the question rather than answer it); anchor "
        "echo measures the same against a cue pair's anchor words."
    ),
    "recoverability": (
        "How well a nearest-centroid classifier tells which member (or which persona) produced a "
        "conditioned cell's lists from the cell's concept profile, each cell held out; chance is 1 over "
        "the number of labels. 'persona within model' classifies the persona among one member's cells, "
        "leaving one question out."
    ),
    "shuffle-null band": (
        "The central 95% of the classifier's accuracies when the labels are shuffled (persona labels "
        "within each member): an accuracy above the band is more than label structure gives."
    ),
    "source-blind ranking": (
        "Evaluator models rank candidate answers drawn from four pools (consensus and rare concepts of the "
        "unconditioned and of the persona-conditioned lists) without seeing their source, as the "
        "unconditioned cohort (no persona) and the conditioned cohort (under a persona); Borda scoring "
        "picks each cohort's advanced pool and top candidate."
    ),
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
