package broker

import "strings"

// RetainRule protects the messages of topics another component keeps as
// durable state from the store's retention (store.Options.Retain): in a
// topic whose name starts with Prefix, with Group set, every message at
// or after Group's committed offset of its queue (all of them while the
// group has none) is kept whatever store.file_reserved_time, the disk
// usage or store.disk_force_clean say; with Group empty, the Newest
// messages of each queue are.
type RetainRule struct {
	Prefix string
	Group  string
	Newest int64
}

// retain is the store's Options.Retain: the first rule whose prefix the
// topic has decides.
func (b *Broker) retain(topic string, queueID int32, maxOffset int64) (int64, bool) {
	for _, r := range b.opts.Retained {
		if !strings.HasPrefix(topic, r.Prefix) {
			continue
		}
		if r.Group == "" {
			return max(0, maxOffset-r.Newest), r.Newest > 0
		}
		off, ok := b.offsets.Query(r.Group, topic, queueID)
		if !ok {
			return 0, true
		}
		return off, true
	}
	return 0, false
}
