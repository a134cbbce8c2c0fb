"""The base of the house: errors, units, limits and temporary names, pure Python that imports no other
part of dlio."""
