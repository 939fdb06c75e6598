package bridge

import "sync"

// keyedRuns queues work per key for one runner at a time per key. The
// first add for an idle key tells its caller to start the key's runner;
// the runner drains the key: it takes everything queued so far in one go,
// handles it, and takes again, until nothing is left and the key is idle
// again. Items of one key are handed over in the order they were added.
// The zero value is ready to use.
type keyedRuns[T any] struct {
	mu   sync.Mutex
	busy map[string][]T // protected by mu: queued items of keys with a runner
}

// add queues v under key. It reports whether key was idle: the caller
// must then start a runner that drains key.
func (k *keyedRuns[T]) add(key string, v T) (start bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	q, ok := k.busy[key]
	if k.busy == nil {
		k.busy = map[string][]T{}
	}
	k.busy[key] = append(q, v)
	return !ok
}

// drain is key's runner: it hands each batch of key's queued items to
// handle, in order, until a take finds none; key is then idle (the next
// add starts a new runner).
func (k *keyedRuns[T]) drain(key string, handle func([]T)) {
	for {
		k.mu.Lock()
		items := k.busy[key]
		if len(items) == 0 {
			delete(k.busy, key)
			k.mu.Unlock()
			return
		}
		k.busy[key] = nil
		k.mu.Unlock()
		handle(items)
	}
}
