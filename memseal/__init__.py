"""memseal"""
