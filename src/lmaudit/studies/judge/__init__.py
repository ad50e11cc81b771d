"""The judge study (seed 001): does a content-preserving change of presentation flip an LLM judge?"""
