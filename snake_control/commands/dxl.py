"""placeholder"""
HELP = "x"
DESCRIPTION = "x"

def add_arguments(p):
    pass

def run(a):
    return 0
