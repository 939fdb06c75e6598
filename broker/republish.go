package broker

import (
	"sync"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// importedTopics are the topics a controller-mode master configured from
// its log rather than from the old master's topic table (copied every
// SlaveSyncInterval, so a topic created shortly before a failover may be
// missing): importStoreTopics at promotion, and republishTopic for a
// delayed message or a committed transaction put to a topic the new
// master has no configuration for. Their queue counts grow with the
// queues the log shows.
type importedTopics struct {
	mu  sync.Mutex
	set map[string]struct{} // protected by mu
}

func (it *importedTopics) add(topic string) {
	it.mu.Lock()
	defer it.mu.Unlock()
	if it.set == nil {
		it.set = map[string]struct{}{}
	}
	it.set[topic] = struct{}{}
}

func (it *importedTopics) has(topic string) bool {
	it.mu.Lock()
	defer it.mu.Unlock()
	_, ok := it.set[topic]
	return ok
}

// republishTopic runs before the broker puts a due delayed message or a
// committed transactional message to its real topic and queue. In
// controller mode a master promoted before the old master's topic table
// reached it may not know that topic: the message was sent while only
// the delay topic or the half topic held it, so importStoreTopics found
// no queue of the topic in the log. Without a configuration the topic
// has no route and its consumers never see the message; the broker
// creates it (read and write, queueID+1 queues, or more for an imported
// topic's later queue ids) and publishes the route. Outside controller
// mode the master's table is the truth: a topic missing there was
// deleted, and is not brought back.
func (b *Broker) republishTopic(topic string, queueID int32) {
	if !b.controlled() || queueID < 0 {
		return
	}
	tc, ok := b.topics.Get(topic)
	if ok && (queueID < tc.ReadQueueNums || !b.imported.has(topic)) {
		return
	}
	n := queueID + 1
	if ok {
		tc.ReadQueueNums, tc.WriteQueueNums = max(tc.ReadQueueNums, n), max(tc.WriteQueueNums, n)
	} else {
		tc = protocol.TopicConfig{TopicName: topic, ReadQueueNums: n, WriteQueueNums: n, Perm: PermRW,
			TopicFilterType: protocol.TopicFilterSingleTag}
	}
	if err := ValidateTopicName(topic); err != nil {
		b.log.Warn("re-put to a topic with an invalid name", "topic", topic, "err", err)
		return
	}
	if err := b.topics.Update(tc); err != nil {
		b.log.Warn("configure the topic of a re-put message", "topic", topic, "err", err)
		return
	}
	b.imported.add(topic)
	b.log.Warn("configured a topic this master did not know, for a delayed or transactional message put to it "+
		"(created on the old master shortly before the failover)", "topic", topic, "queues", tc.WriteQueueNums)
	b.goFunc(b.triggerRegister)
}
