"""The text rules of SPEC-027 §2.2 as they were before the fast paths (``crp_stream.core``'s
conflicts, substitution and polarity at 8d84df9, memos replaced by plain LRUs; quantities did not
change and is imported): the
reference the property tests compare the current modules with (tests/unit/test_text_rules_equivalence.py).
Not to be edited: a change of decision belongs in crp_stream.core and in these files together."""
