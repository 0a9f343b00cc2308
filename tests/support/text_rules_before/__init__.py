"""The text rules of SPEC-027 §2.2 as they were before issue 12's fast paths (``crp_stream.core``'s
conflicts, substitution, polarity and quantities at 8d84df9, memos replaced by plain LRUs): the
reference the property tests compare the current modules with (tests/unit/test_text_rules_equivalence.py).
Not to be edited: a change of decision belongs in crp_stream.core and in these files together."""
