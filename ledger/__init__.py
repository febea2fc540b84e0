"""memseal.ledger"""
