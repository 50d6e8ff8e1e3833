"""What every layer of newsroom shares and nothing else: the root of its errors.

It sits below all six packages (transforms, warehouse, tasks, flows, serving, replay) and imports
none of them, so each package's ``errors.py`` can build on it without an arrow running upward or
sideways (issue 17).
"""
