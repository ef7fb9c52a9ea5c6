package event

// entryHeap is a binary min-heap of entries ordered by less. Each entry
// remembers its index, so removal costs O(log n). An entry is in at most
// one heap at a time.
type entryHeap struct {
	items []*entry
	less  func(a, b *entry) bool
}

func (h *entryHeap) peek() *entry {
	if len(h.items) == 0 {
		return nil
	}
	return h.items[0]
}

func (h *entryHeap) push(e *entry) {
	e.hidx = len(h.items)
	h.items = append(h.items, e)
	h.up(e.hidx)
}

func (h *entryHeap) pop() *entry {
	if len(h.items) == 0 {
		return nil
	}
	e := h.items[0]
	h.remove(e)
	return e
}

func (h *entryHeap) remove(e *entry) {
	i := e.hidx
	if i < 0 || i >= len(h.items) || h.items[i] != e {
		return
	}
	last := len(h.items) - 1
	if i != last {
		h.swap(i, last)
	}
	h.items[last] = nil
	h.items = h.items[:last]
	if i != last {
		if !h.down(i) {
			h.up(i)
		}
	}
	e.hidx = -1
}

func (h *entryHeap) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].hidx = i
	h.items[j].hidx = j
}

func (h *entryHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(h.items[i], h.items[p]) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *entryHeap) down(i int) bool {
	start := i
	n := len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h.less(h.items[r], h.items[l]) {
			m = r
		}
		if !h.less(h.items[m], h.items[i]) {
			break
		}
		h.swap(i, m)
		i = m
	}
	return i > start
}

// filter keeps the entries for which keep is true and restores heap order.
func (h *entryHeap) filter(keep func(*entry) bool) []*entry {
	var dropped []*entry
	kept := h.items[:0]
	for _, e := range h.items {
		if keep(e) {
			kept = append(kept, e)
		} else {
			e.hidx = -1
			dropped = append(dropped, e)
		}
	}
	for i := len(kept); i < len(h.items); i++ {
		h.items[i] = nil
	}
	h.items = kept
	for i, e := range h.items {
		e.hidx = i
	}
	for i := len(h.items)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
	return dropped
}
