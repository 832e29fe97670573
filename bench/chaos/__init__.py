"""`make chaos`: random kill -9 of brains, runners and the archiver while scripted sessions run.

`run.py` drives the processes and the kills, `ownership.py` reads who owned which brain
partition when from the brains' logs, `figures.py` turns the log and the side effects
into the printed figures. Everything here measures; nothing in services/ knows of it.
"""
