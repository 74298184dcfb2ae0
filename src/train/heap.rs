//! The lazy max-heap of `(count, pair)`. A pair is pushed when its count rises; when it falls
//! the old entry stays. A popped entry whose count is stale is pushed again with the current
//! count (if still positive): every pair with a positive count has an entry at least as large,
//! so the first valid pop is the true maximum. The order comes from a closure at each call, so
//! it can read token bytes (lexicographic ties) or ranks (HF ties) without keys in the entries.

/// 12 bytes (packed: a padded entry would be 16).
#[derive(Clone, Copy)]
#[repr(C, packed(4))]
pub struct Entry {
    pub count: i64,
    pub pair: u32,
}

/// A binary max-heap whose order is given by a closure at each call (so it can look at token
/// bytes). `better(x, y)` is true when `x` must come out before `y`.
pub struct Heap {
    pub v: Vec<Entry>,
}

impl Heap {
    pub fn push(&mut self, e: Entry, better: &impl Fn(&Entry, &Entry) -> bool) {
        self.v.push(e);
        let mut i = self.v.len() - 1;
        while i > 0 {
            let p = (i - 1) / 2;
            if better(&self.v[i], &self.v[p]) {
                self.v.swap(i, p);
                i = p;
            } else {
                break;
            }
        }
    }

    fn sift_down(&mut self, mut i: usize, better: &impl Fn(&Entry, &Entry) -> bool) {
        let n = self.v.len();
        loop {
            let l = 2 * i + 1;
            if l >= n {
                break;
            }
            let r = l + 1;
            let c = if r < n && better(&self.v[r], &self.v[l]) { r } else { l };
            if better(&self.v[c], &self.v[i]) {
                self.v.swap(c, i);
                i = c;
            } else {
                break;
            }
        }
    }

    pub fn pop(&mut self, better: &impl Fn(&Entry, &Entry) -> bool) -> Option<Entry> {
        let n = self.v.len();
        if n == 0 {
            return None;
        }
        self.v.swap(0, n - 1);
        let top = self.v.pop();
        if !self.v.is_empty() {
            self.sift_down(0, better);
        }
        top
    }

    pub fn heapify(&mut self, better: &impl Fn(&Entry, &Entry) -> bool) {
        for i in (0..self.v.len() / 2).rev() {
            self.sift_down(i, better);
        }
    }
}
