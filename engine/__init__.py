"""memseal.engine"""
