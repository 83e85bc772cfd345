import sys
print(sys.implementation.name, sys.implementation.version)
