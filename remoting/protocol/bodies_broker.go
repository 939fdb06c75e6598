package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
)

// Bodies of broker admin calls: subscription groups, consumer and producer
// connections, consume and topic statistics.

// SubscriptionGroupConfig is a consumer group's configuration
// (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP body, subscriptionGroup.json).
type SubscriptionGroupConfig struct {
	BrokerID                       int64  `json:"brokerId"`
	ConsumeBroadcastEnable         bool   `json:"consumeBroadcastEnable"`
	ConsumeEnable                  bool   `json:"consumeEnable"`
	ConsumeFromMinEnable           bool   `json:"consumeFromMinEnable"`
	GroupName                      string `json:"groupName"`
	NotifyConsumerIdsChangedEnable bool   `json:"notifyConsumerIdsChangedEnable"`
	RetryMaxTimes                  int32  `json:"retryMaxTimes"`
	RetryQueueNums                 int32  `json:"retryQueueNums"`
	WhichBrokerWhenConsumeSlowly   int64  `json:"whichBrokerWhenConsumeSlowly"`
}

// SubscriptionGroupWrapper is the body of GET_ALL_SUBSCRIPTIONGROUP_CONFIG.
type SubscriptionGroupWrapper struct {
	DataVersion            DataVersion                         `json:"dataVersion"`
	SubscriptionGroupTable map[string]*SubscriptionGroupConfig `json:"subscriptionGroupTable"`
}

// Connection is one client connection in connection lists.
type Connection struct {
	ClientAddr string `json:"clientAddr"`
	ClientID   string `json:"clientId"`
	Language   string `json:"language"`
	Version    int32  `json:"version"`
}

// ConsumerConnection answers GET_CONSUMER_CONNECTION_LIST.
type ConsumerConnection struct {
	ConnectionSet     []*Connection                `json:"connectionSet"`
	ConsumeFromWhere  string                       `json:"consumeFromWhere"`
	ConsumeType       string                       `json:"consumeType"`
	MessageModel      string                       `json:"messageModel"`
	SubscriptionTable map[string]*SubscriptionData `json:"subscriptionTable"`
}

// ProducerConnection answers GET_PRODUCER_CONNECTION_LIST.
type ProducerConnection struct {
	ConnectionSet []*Connection `json:"connectionSet"`
}

// OffsetWrapper is one queue's progress in ConsumeStats. PullOffset
// (RocketMQ 5) is where the group's pulls reached, never below
// ConsumerOffset: RocketMQ 5's mqadmin consumerProgress prints
// PullOffset - ConsumerOffset as the queue's in-flight messages.
type OffsetWrapper struct {
	BrokerOffset   int64 `json:"brokerOffset"`
	ConsumerOffset int64 `json:"consumerOffset"`
	LastTimestamp  int64 `json:"lastTimestamp"`
	PullOffset     int64 `json:"pullOffset"`
}

// TopicOffset is one queue's range in TopicStatsTable.
type TopicOffset struct {
	LastUpdateTimestamp int64 `json:"lastUpdateTimestamp"`
	MaxOffset           int64 `json:"maxOffset"`
	MinOffset           int64 `json:"minOffset"`
}

// MQEntry is one entry of a map keyed by MessageQueue.
type MQEntry[V any] struct {
	Queue MessageQueue
	Value V
}

// MQMap is a map keyed by MessageQueue. Java (fastjson) writes such maps
// with the key object itself as the key, which is not standard JSON:
//
//	{{"brokerName":"b","queueId":0,"topic":"T"}:{"brokerOffset":5,...},...}
//
// MQMap writes exactly that (sorted by topic, broker, queue) so Java admin
// tools read it, and reads it back with a small scanner.
type MQMap[V any] []MQEntry[V]

// Sort orders the entries by topic, broker name and queue id.
func (m MQMap[V]) Sort() {
	sort.Slice(m, func(i, j int) bool {
		a, b := m[i].Queue, m[j].Queue
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		if a.BrokerName != b.BrokerName {
			return a.BrokerName < b.BrokerName
		}
		return a.QueueID < b.QueueID
	})
}

// MarshalJSON writes the fastjson form.
func (m MQMap[V]) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, e := range m {
		if i > 0 {
			buf.WriteByte(',')
		}
		k, err := json.Marshal(e.Queue)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(e.Value)
		if err != nil {
			return nil, err
		}
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(v)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// UnmarshalJSON reads the fastjson form (object keys) and, for tolerance,
// the standard form with the key's JSON text as a string.
func (m *MQMap[V]) UnmarshalJSON(b []byte) error {
	*m = (*m)[:0]
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return fmt.Errorf("%w: MessageQueue map must be an object", ErrBadBody)
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return nil
	}
	for {
		var e MQEntry[V]
		dec := json.NewDecoder(bytes.NewReader(b[i:]))
		var key json.RawMessage
		if err := dec.Decode(&key); err != nil {
			return fmt.Errorf("%w: MessageQueue map key: %v", ErrBadBody, err)
		}
		i += int(dec.InputOffset())
		if len(key) > 0 && key[0] == '"' {
			var s string
			if err := json.Unmarshal(key, &s); err != nil {
				return fmt.Errorf("%w: MessageQueue map key: %v", ErrBadBody, err)
			}
			key = json.RawMessage(s)
		}
		if err := unmarshalLenient(key, &e.Queue); err != nil {
			return fmt.Errorf("%w: MessageQueue map key %s: %v", ErrBadBody, key, err)
		}
		i = skipWS(b, i)
		if i >= len(b) || b[i] != ':' {
			return fmt.Errorf("%w: MessageQueue map: want ':' at %d", ErrBadBody, i)
		}
		i++
		dec = json.NewDecoder(bytes.NewReader(b[i:]))
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return fmt.Errorf("%w: MessageQueue map value: %v", ErrBadBody, err)
		}
		if err := unmarshalLenient(val, &e.Value); err != nil {
			return fmt.Errorf("%w: MessageQueue map value: %v", ErrBadBody, err)
		}
		i += int(dec.InputOffset())
		*m = append(*m, e)
		i = skipWS(b, i)
		if i >= len(b) {
			return fmt.Errorf("%w: MessageQueue map: unexpected end", ErrBadBody)
		}
		if b[i] == '}' {
			return nil
		}
		if b[i] != ',' {
			return fmt.Errorf("%w: MessageQueue map: want ',' or '}' at %d", ErrBadBody, i)
		}
		i = skipWS(b, i+1)
	}
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// ConsumeStats answers GET_CONSUME_STATS: per queue, the broker's max
// offset and the group's committed offset.
type ConsumeStats struct {
	ConsumeTps  float64               `json:"consumeTps"`
	OffsetTable MQMap[*OffsetWrapper] `json:"offsetTable"`
}

// Lag returns the total of brokerOffset - consumerOffset over the queues.
func (c *ConsumeStats) Lag() int64 {
	var n int64
	for _, e := range c.OffsetTable {
		if e.Value != nil {
			n += e.Value.BrokerOffset - e.Value.ConsumerOffset
		}
	}
	return n
}

// TopicStatsTable answers GET_TOPIC_STATS_INFO.
type TopicStatsTable struct {
	OffsetTable MQMap[*TopicOffset] `json:"offsetTable"`
}

// GetConsumeStatsRequestHeader is GET_CONSUME_STATS (208): consumerGroup!,
// topic (empty = every topic of the group).
type GetConsumeStatsRequestHeader struct {
	ConsumerGroup string
	Topic         string
}

// TopicHeader is a request header with only topic! (GET_TOPIC_STATS_INFO,
// QUERY_TOPIC_CONSUME_BY_WHO).
type TopicHeader struct {
	Topic string
}

// GroupHeader is a request header with only groupName! (DELETE_SUBSCRIPTIONGROUP).
type GroupHeader struct {
	GroupName string
}
