package client

import (
	"hash/crc32"
	"sort"
	"strconv"
)

// AllocateStrategy divides a topic's queues among the members of a
// consumer group. Every member runs it on the same inputs and must reach
// the same division. mqAll and cidAll arrive sorted (queues by topic,
// broker name, queue id; client ids lexicographically).
type AllocateStrategy interface {
	Name() string
	Allocate(self string, mqAll []MessageQueue, cidAll []string) []MessageQueue
}

// AllocateAveragely is RocketMQ's default: contiguous blocks, the first
// (n mod c) members get one more queue (protocol doc section 6).
type AllocateAveragely struct{}

// Name implements AllocateStrategy.
func (AllocateAveragely) Name() string { return "AVG" }

// Allocate implements AllocateStrategy.
func (AllocateAveragely) Allocate(self string, mqAll []MessageQueue, cidAll []string) []MessageQueue {
	index := indexOf(cidAll, self)
	if index < 0 || len(mqAll) == 0 {
		return nil
	}
	n, c := len(mqAll), len(cidAll)
	mod := n % c
	var avg int
	switch {
	case n <= c:
		avg = 1
	case mod > 0 && index < mod:
		avg = n/c + 1
	default:
		avg = n / c
	}
	var start int
	if mod > 0 && index < mod {
		start = index * avg
	} else {
		start = index*avg + mod
	}
	rng := min(avg, n-start)
	out := make([]MessageQueue, 0, max(rng, 0))
	for i := 0; i < rng; i++ {
		out = append(out, mqAll[(start+i)%n])
	}
	return out
}

// AllocateCircle deals queues out round-robin: member i gets queues i,
// i+c, i+2c...
type AllocateCircle struct{}

// Name implements AllocateStrategy.
func (AllocateCircle) Name() string { return "AVG_BY_CIRCLE" }

// Allocate implements AllocateStrategy.
func (AllocateCircle) Allocate(self string, mqAll []MessageQueue, cidAll []string) []MessageQueue {
	index := indexOf(cidAll, self)
	if index < 0 {
		return nil
	}
	var out []MessageQueue
	for i := index; i < len(mqAll); i += len(cidAll) {
		out = append(out, mqAll[i])
	}
	return out
}

// AllocateConsistentHash places members on a hash ring with VirtualNodes
// points each (default 10) and gives each queue to the first member
// clockwise from the queue's hash, so a member joining or leaving moves few
// queues.
type AllocateConsistentHash struct {
	VirtualNodes int
}

// Name implements AllocateStrategy.
func (AllocateConsistentHash) Name() string { return "CONSISTENT_HASH" }

// Allocate implements AllocateStrategy.
func (a AllocateConsistentHash) Allocate(self string, mqAll []MessageQueue, cidAll []string) []MessageQueue {
	if indexOf(cidAll, self) < 0 {
		return nil
	}
	vn := a.VirtualNodes
	if vn <= 0 {
		vn = 10
	}
	type point struct {
		h   uint32
		cid string
	}
	ring := make([]point, 0, len(cidAll)*vn)
	for _, cid := range cidAll {
		for i := 0; i < vn; i++ {
			ring = append(ring, point{crc32.ChecksumIEEE([]byte(cid + "#" + strconv.Itoa(i))), cid})
		}
	}
	sort.Slice(ring, func(i, j int) bool {
		if ring[i].h != ring[j].h {
			return ring[i].h < ring[j].h
		}
		return ring[i].cid < ring[j].cid
	})
	var out []MessageQueue
	for _, mq := range mqAll {
		h := crc32.ChecksumIEEE([]byte(mq.Topic + "@" + mq.BrokerName + "@" + strconv.Itoa(int(mq.QueueID))))
		i := sort.Search(len(ring), func(i int) bool { return ring[i].h >= h })
		if i == len(ring) {
			i = 0
		}
		if ring[i].cid == self {
			out = append(out, mq)
		}
	}
	return out
}

func indexOf(ids []string, id string) int {
	for i, s := range ids {
		if s == id {
			return i
		}
	}
	return -1
}

// sortQueues orders queues by topic, broker name and queue id.
func sortQueues(qs []MessageQueue) {
	sort.Slice(qs, func(i, j int) bool { return lessQueue(qs[i], qs[j]) })
}

func lessQueue(a, b MessageQueue) bool {
	if a.Topic != b.Topic {
		return a.Topic < b.Topic
	}
	if a.BrokerName != b.BrokerName {
		return a.BrokerName < b.BrokerName
	}
	return a.QueueID < b.QueueID
}
