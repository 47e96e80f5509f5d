"""Per-class accuracy on the Semeion even half (upload path): shipped EntNet / RIM vs the elastic pilots.

    RIMSCOPE_HANDWRITING_DIR=<data>/handwriting python results/pilots/elastic_train/per_class.py <folder of the pilot weights>
"""
import os
import sys
from pathlib import Path

from core.catalog import load_entry
from core.studies.handwriting.external import load_external, predictions, shipped_entries, upload_inputs
from core.training.weights import load_weights

data = load_external("semeion", Path(os.environ["RIMSCOPE_HANDWRITING_DIR"]))
inp = upload_inputs(data.x)
ev = data.half("even")
models = {}  # name -> model
for e in shipped_entries():
    if e.model in ("entnet", "rim"):
        models[e.model + " shipped"] = load_entry(e)[0]
for m in ("entnet_seed3", "rim_seed4"):
    models[m + " elastic"] = load_weights(str(Path(sys.argv[1]) / m))[0]
y = data.y[ev]
print("class   " + " ".join(f"{c:>5}" for c in range(10)))
for name, mdl in models.items():
    p = predictions(mdl, inp)[ev]
    print(f"{name:22s}", " ".join(f"{100*(p[y==c]==c).mean():5.0f}" for c in range(10)))
    wrong = p != y
    conf = {}
    for t, q in zip(y[wrong], p[wrong]):
        conf[(int(t), int(q))] = conf.get((int(t), int(q)), 0) + 1
    print("   top confusions", sorted(conf.items(), key=lambda kv: -kv[1])[:8])
