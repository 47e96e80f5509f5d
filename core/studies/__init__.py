"""Experiments built on the rest of core (each imports anything below it, nothing imports them but
the pages): handwriting/ measures how the models read drawn, photographed and other people's
digits."""
