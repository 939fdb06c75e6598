package store

// queueCache holds values of one topic's queues by queue id: the topic a
// run of puts or dispatched records went to last, so that the next of the
// run finds its queue's value with a string compare and an index rather
// than a map lookup that hashes the topic. Its owner resets it whenever a
// cached value leaves the map it came from.
type queueCache[V any] struct {
	topic string // the map's own copy
	byID  []*V   // nil: not cached
}

// maxCachedQueueID bounds the queue ids a queueCache holds.
const maxCachedQueueID = 255

// lookup returns the value of queue q when same (the caller's topic is
// c.topic), or nil.
func (c *queueCache[V]) lookup(same bool, q int32) *V {
	if same && q >= 0 && int(q) < len(c.byID) {
		return c.byID[q]
	}
	return nil
}

// keep caches v, the value of topic's queue q (topic being the map's
// own string), in place of another topic's.
func (c *queueCache[V]) keep(topic string, q int32, v *V) {
	if v == nil || q < 0 || q > maxCachedQueueID {
		return
	}
	if topic != c.topic {
		c.reset()
		c.topic = topic
	}
	if int(q) >= len(c.byID) {
		c.byID = append(c.byID, make([]*V, int(q)+1-len(c.byID))...)
	}
	c.byID[q] = v
}

// reset empties the cache.
func (c *queueCache[V]) reset() {
	clear(c.byID)
	c.byID, c.topic = c.byID[:0], ""
}
