# Simulates cache-stable packing with clearing on the bench's tool loop (turn sizes like
# benches/suite/cache.rs) to compare designs: user turns held (median), jump share, reuse.
import random, statistics
random.seed(7)
ROOM = 5800
def turns(n):
    out = []
    for t in range(n):
        q = 12 + 8 * (1 + random.randrange(6))
        steps = 1 + random.randrange(4)
        calls = []
        for s in range(steps):
            lines = 2 + random.randrange(25)
            calls.append((28, 22 * lines + 5))  # call, result whole
        a = 20 + 7 * (1 + random.randrange(5))
        out.append((q, calls, a))
    return out
PH = 28
def whole(t): return t[0] + sum(c + r for c, r in t[1]) + t[2]
def cleared(t): return t[0] + sum(c + min(r, PH) for c, r in t[1]) + t[2]
def nres(t): return len(t[1])

def level(prev, off):
    if prev is None: return 63
    return (prev ^ off).bit_length() - 1

def simulate(design, N=300, **kw):
    T = turns(N)
    offs = []; o = 0
    for t in T: offs.append(o); o += whole(t)
    lv = [level(offs[i-1] if i else None, offs[i]) for i in range(N)]
    held = []; jumps = 0; prev = None; reuse = []
    for end in range(1, N):  # turns 0..end-1 in log, pending question
        state = design(T[:end], lv[:end], **kw)
        if state is None:
            state = (-end, -end, ROOM)  # fallback: a pack of its own every call
        s, c, cost = state   # s: first turn index held; c: first verbatim turn; cost
        held.append(end - s if s >= 0 else 0)
        key = (s, c)
        if prev is not None:
            if key != prev: jumps += 1; reuse.append(0.0)
            else: reuse.append(1 - whole(T[end-1]) / cost)
        prev = key
    return statistics.median(held), jumps / len(reuse), statistics.median(reuse)

def plain(T, lv):
    # cache-stable without clearing: oldest anchor of level L in the newest-that-fits window
    L = (ROOM // 2).bit_length() - 1
    tot = 0; i = len(T)
    while i > 0 and tot + whole(T[i-1]) <= ROOM: tot += whole(T[i-1]); i -= 1
    if i == 0: return 0, 0, tot
    cands = [j for j in range(i, len(T)) if lv[j] >= L]
    s = cands[0] if cands else i
    return s, s, sum(whole(t) for t in T[s:])

def s_anchored(T, lv, frac=0.5, keep=3, step_div=1):
    X = int(ROOM * frac); W = ROOM - X
    L = (max(W // step_div, 1)).bit_length() - 1
    n = len(T)
    def C_of(s):
        acc = 0
        for c in range(s, n):
            if acc >= X: return c
            acc += cleared(T[c])
        return None
    def cost(s, c):
        reg = T[s:c]
        # keep the region's newest `keep` results whole
        extra = 0; k = keep
        for t in reversed(reg):
            for cc, r in reversed(t[1]):
                if k > 0: extra += r - min(r, PH); k -= 1
        return sum(cleared(t) for t in reg) + extra + sum(whole(t) for t in T[c:])
    if sum(whole(t) for t in T) <= ROOM: return 0, 0, sum(whole(t) for t in T)
    best = None
    for s in range(n):
        if lv[s] < L: continue
        c = C_of(s)
        if c is None: continue
        k = cost(s, c)
        if k <= ROOM: best = (s, c, k); break
    return best

print("plain", simulate(plain))
for frac in (0.3, 0.35, 0.4, 0.45, 0.5):
    for div in (1, 2):
        print("s_anchored", frac, div, simulate(s_anchored, frac=frac, step_div=div))

def grid(T, lv, xfac=1.5, keep=3):
    n = len(T)
    if sum(whole(t) for t in T) <= ROOM: return 0, 0, sum(whole(t) for t in T)
    L = (ROOM // 2).bit_length() - 1
    cell = 1 << L
    X = ROOM - int(xfac * cell)
    anchors = [j for j in range(n) if lv[j] >= L]
    def cost(s, c):
        reg = T[s:c]
        extra = 0; k = keep
        for t in reversed(reg):
            for cc, r in reversed(t[1]):
                if k > 0: extra += r - min(r, PH); k -= 1
        return sum(cleared(t) for t in reg) + extra + sum(whole(t) for t in T[c:])
    for s in anchors:
        acc = 0; c = None
        for j in range(s, n):
            if acc >= X and lv[j] >= L: c = j; break
            acc += cleared(T[j])
        if c is None: continue
        k = cost(s, c)
        if k <= ROOM: return s, c, k
    return None

for xf in (1.0, 1.25, 1.5, 2.0):
    print("grid", xf, simulate(grid, xfac=xf))

def kcells(T, lv, k=3, div=2, keep=3):
    n = len(T)
    if sum(whole(t) for t in T) <= ROOM: return 0, 0, sum(whole(t) for t in T)
    L = (ROOM // div).bit_length() - 1
    A = [j for j in range(n) if lv[j] >= L]
    def cost(s, c):
        reg = T[s:c]
        extra = 0; kk = keep
        for t in reversed(reg):
            for cc, r in reversed(t[1]):
                if kk > 0: extra += r - min(r, PH); kk -= 1
        return sum(cleared(t) for t in reg) + extra + sum(whole(t) for t in T[c:])
    for i in range(len(A)):
        if i + k >= len(A): break
        kc = cost(A[i], A[i+k])
        if kc <= ROOM: return A[i], A[i+k], kc
    return None

for div in (2, 4, 8):
    for k in (1, 2, 3, 4, 6, 8):
        print("kcells div", div, "k", k, simulate(kcells, k=k, div=div))
print("---")
for ph in (28, 20):
    PH = ph
    for k in (4, 5):
        print("kcells ph", ph, "k", k, simulate(kcells, k=k, div=2))
