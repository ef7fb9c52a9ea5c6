package event

import "sync"

// busWatchers are the watches of Bus.Watch, by topic.
type busWatchers struct {
	mu sync.Mutex
	m  map[string]map[chan struct{}]struct{}
}

// Watch returns a channel that receives a value (coalesced: one value may
// stand for many appends) after records are appended to topic through
// this Bus, or, over a store that is a [Notifier], by any process; and a
// function that ends the watch. Over a store that is not a Notifier,
// appends of other processes are not seen: read the topic every
// [Config].PollInterval too. A reader that follows a topic (a live fan-out,
// a projection) waits on it between reads instead of polling.
func (b *Bus) Watch(topic string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	w := &b.watchers
	w.mu.Lock()
	if w.m == nil {
		w.m = make(map[string]map[chan struct{}]struct{})
	}
	if w.m[topic] == nil {
		w.m[topic] = make(map[chan struct{}]struct{})
	}
	w.m[topic][ch] = struct{}{}
	w.mu.Unlock()
	var quit chan struct{}
	var wg sync.WaitGroup
	if b.notifier != nil {
		src, unwatch := b.notifier.Watch(topic)
		quit = make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer unwatch()
			for {
				select {
				case <-quit:
					return
				case <-src:
					wakeUp(ch)
				}
			}
		}()
	}
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			w.mu.Lock()
			delete(w.m[topic], ch)
			if len(w.m[topic]) == 0 {
				delete(w.m, topic)
			}
			w.mu.Unlock()
			if quit != nil {
				close(quit)
				wg.Wait()
			}
		})
	}
}

// wake signals the watches of topic.
func (w *busWatchers) wake(topic string) {
	w.mu.Lock()
	for ch := range w.m[topic] {
		wakeUp(ch)
	}
	w.mu.Unlock()
}
