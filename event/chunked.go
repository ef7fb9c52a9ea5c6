package event

// chunkedList is an append-only list kept in chunks of listChunk elements,
// so that growing it never moves what it holds. A topic's indexes grow
// with the topic: doubling a slice of a million entries would copy it,
// and fault in the pages of the new array, under the store's lock,
// stalling every publisher and reader of the topic for milliseconds.
// Only the first chunk grows by doubling (a small topic stays small);
// every later one is allocated whole, and what it holds never moves.
type chunkedList[T any] struct {
	chunks [][]T
	n      int
}

const (
	listChunkBits = 12
	listChunk     = 1 << listChunkBits
)

func (l *chunkedList[T]) len() int { return l.n }

// at returns the element at index i, which must be below len.
func (l *chunkedList[T]) at(i int) *T {
	return &l.chunks[i>>listChunkBits][i&(listChunk-1)]
}

// last returns the last element; the list must not be empty.
func (l *chunkedList[T]) last() *T { return l.at(l.n - 1) }

func (l *chunkedList[T]) append(v T) {
	switch k := len(l.chunks); {
	case k == 0:
		l.chunks = append(l.chunks, []T{v})
	case len(l.chunks[k-1]) < listChunk:
		l.chunks[k-1] = append(l.chunks[k-1], v)
	default:
		c := make([]T, 1, listChunk)
		c[0] = v
		l.chunks = append(l.chunks, c)
	}
	l.n++
}
