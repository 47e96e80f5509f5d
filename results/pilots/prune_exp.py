"""Session 10 experiment: thick strokes redrawn along a spur-pruned skeleton instead of eroded."""
import sys, time
import numpy as np
from scipy.ndimage import convolve, distance_transform_edt
from skimage.morphology import skeletonize
from PIL import Image
from core.digits import ink, external as de
from core.catalog import load_entry

K = np.ones((3, 3), int); K[1, 1] = 0
orig = ink.normalise_strokes

def neighbours(s):
    return convolve(s.astype(int), K, mode='constant') * s

def prune(skel, min_len):
    s = skel.copy()
    for _ in range(3):
        nb = neighbours(s)
        ends = np.argwhere((nb == 1))
        removed = False
        for e in ends:
            path = [tuple(e)]; prev = None; cur = tuple(e)
            hit_junction = False
            while len(path) <= min_len:
                r, c = cur
                nxt = [(r+dr, c+dc) for dr in (-1,0,1) for dc in (-1,0,1) if (dr or dc)
                       and 0 <= r+dr < s.shape[0] and 0 <= c+dc < s.shape[1] and s[r+dr, c+dc] and (r+dr, c+dc) not in path]
                if len(nxt) != 1:
                    hit_junction = len(nxt) > 1
                    break
                cur = nxt[0]
                if neighbours_at(s, cur) > 2:
                    hit_junction = True
                    break
                path.append(cur)
            if hit_junction and len(path) < min_len:
                for p in path: s[p] = False
                removed = True
        if not removed: break
    return s

def neighbours_at(s, p):
    r, c = p
    return int(s[max(0,r-1):r+2, max(0,c-1):c+2].sum()) - 1

SPUR = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0

def pruned_normalise(mask, inkarr):
    h, w = mask.shape
    scale = ink.STROKE_SIDE / max(h, w)
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    if scale < 1:
        small = Image.fromarray(mask.astype(np.float32)).resize(size, Image.Resampling.BOX)
        shape = np.asarray(small) >= 0.3
    else:
        big = Image.fromarray(inkarr.astype(np.float32)).resize(size, Image.Resampling.BILINEAR)
        shape = np.asarray(big) > 127.5
        if not shape.any(): shape = np.asarray(big) > 0
    margin = ink.STROKE_SIDE // 2
    padded = np.pad(shape, margin)
    skeleton = skeletonize(padded)
    if not skeleton.any(): return inkarr
    rows = np.flatnonzero(skeleton.any(axis=1)); cols = np.flatnonzero(skeleton.any(axis=0))
    extent = max(rows[-1] - rows[0], cols[-1] - cols[0]) + 1
    width = max(1.0, ink.STROKE_WIDTH * extent / (ink.DIGIT_BOX - ink.STROKE_WIDTH))
    own = shape.sum() / skeleton.sum()
    if own <= width * ink.STROKE_TOLERANCE:
        return orig(mask, inkarr)  # thin or near: as shipped
    inside = distance_transform_edt(padded)
    half = float(np.median(inside[skeleton]))
    sk = prune(skeleton, int(round(SPUR * half)))
    if not sk.any(): return orig(mask, inkarr)
    redrawn = np.clip(width / 2 + 0.5 - distance_transform_edt(~sk), 0, 1) * 255
    drawn = redrawn > 0
    r = np.flatnonzero(drawn.any(axis=1)); c = np.flatnonzero(drawn.any(axis=0))
    return redrawn[r[0]:r[-1]+1, c[0]:c[-1]+1]

models = {e.model: load_entry(e)[0] for e in de.shipped_entries('converged')}
import os
mn = np.load(os.path.join(os.environ['RIMSCOPE_DATA_DIR'], 'mnist', 'test.npz'))
def run(tag):
    t = time.time(); out = {}
    for name in ['optdigits', 'semeion']:
        ext = de.load_external(name, sample=False); y, x = ext.y, ext.x  # the full set (RIMSCOPE_HANDWRITING_DIR)
        even = np.arange(len(y)) % 2 == 0
        inp = de.upload_inputs(x[even]); ye = y[even]
        for m, mod in models.items():
            p = de.predictions(mod, inp)
            out.setdefault(m, []).append(f"{(p == ye).mean()*100:.1f} (1s {(p[ye==1]==1).mean()*100:.0f})")
    xm, ym = mn['x'][::10], mn['y'][::10]
    inp = de.upload_inputs(255 - (255 - xm))  # MNIST digits: 255 = ink, as the sets
    for m, mod in models.items():
        p = de.predictions(mod, inp)
        out[m].append(f"{(p == ym).mean()*100:.1f}")
    print(tag, f"{time.time()-t:.0f}s  [optdigits even | semeion even | MNIST 1000 via upload]")
    for m, v in out.items(): print('  ', m.ljust(14), ' | '.join(v), flush=True)

if __name__ == '__main__':
    if 'base' in sys.argv: run('base')
    ink.normalise_strokes = pruned_normalise
    import core.digits.prepare as P
    if hasattr(P, 'normalise_strokes'): P.normalise_strokes = pruned_normalise
    run(f'prune{SPUR}')
