"""The memory-order mutation sweep behind tools/order_mutants.py: sites (the swept files and
the suites that must kill their mutants), mutants (finding atomic operations and weakening
their orders), runner (building and testing each mutant) and report (the table in
docs/testing.md)."""
