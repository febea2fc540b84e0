"""memseal.tools"""
