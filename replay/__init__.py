"""memseal.replay"""
