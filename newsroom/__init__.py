"""What every layer of newsroom shares and nothing else: the root of its errors
(:mod:`newsroom.errors`) and the one reader of the instants it writes (:mod:`newsroom.times`).

It sits below all six packages (transforms, warehouse, tasks, flows, serving, replay) and imports
none of them, so each package's ``errors.py`` can build on it, and every layer read instants by the
same rules, without an arrow running upward or sideways (issue 17).
"""
