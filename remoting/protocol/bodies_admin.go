package protocol

import (
	"bytes"
	"encoding/json"
	"sort"
)

// Bodies of the admin requests mqadmin sends to brokers. Fields are in
// alphabetical key order, as fastjson writes them; bodies holding a
// MessageQueue-keyed map write themselves (rawJSON) in fastjson's form.

// GroupList answers QUERY_TOPIC_CONSUME_BY_WHO (300).
type GroupList struct {
	GroupList []string `json:"groupList"`
}

// MarshalJSON writes an empty list as [].
func (g GroupList) MarshalJSON() ([]byte, error) {
	type plain GroupList
	if g.GroupList == nil {
		g.GroupList = []string{}
	}
	return json.Marshal(plain(g))
}

// QueueTimeSpan is one queue's times in QueryConsumeTimeSpanBody: the
// store times of its first and last message and of the group's last
// consumed one, and how long the next unconsumed one has waited (ms).
type QueueTimeSpan struct {
	ConsumeTimeStamp int64         `json:"consumeTimeStamp"`
	DelayTime        int64         `json:"delayTime"`
	MaxTimeStamp     int64         `json:"maxTimeStamp"`
	MessageQueue     *MessageQueue `json:"messageQueue"`
	MinTimeStamp     int64         `json:"minTimeStamp"`
}

// QueryConsumeTimeSpanBody answers QUERY_CONSUME_TIME_SPAN (303).
type QueryConsumeTimeSpanBody struct {
	ConsumeTimeSpanSet []*QueueTimeSpan `json:"consumeTimeSpanSet"`
}

// ProducerInfo is one producer in ProducerTableInfo.
type ProducerInfo struct {
	ClientID            string `json:"clientId"`
	Language            string `json:"language"`
	LastUpdateTimestamp int64  `json:"lastUpdateTimestamp"`
	RemoteIP            string `json:"remoteIP"`
	Version             int32  `json:"version"`
}

// ProducerTableInfo answers GET_ALL_PRODUCER_INFO (328): producers by
// group.
type ProducerTableInfo struct {
	Data map[string][]*ProducerInfo `json:"data"`
}

// BrokerStatsItem is one window of BrokerStatsData: the amount added, per
// second, and per add call.
type BrokerStatsItem struct {
	Avgpt float64 `json:"avgpt"`
	Sum   int64   `json:"sum"`
	TPS   float64 `json:"tps"`
}

// BrokerStatsData answers VIEW_BROKER_STATS_DATA (315): a statistic over
// the last day, hour and minute.
type BrokerStatsData struct {
	StatsDay    BrokerStatsItem `json:"statsDay"`
	StatsHour   BrokerStatsItem `json:"statsHour"`
	StatsMinute BrokerStatsItem `json:"statsMinute"`
}

// ConsumeQueueData is one consume-queue entry in
// QueryConsumeQueueResponseBody; eval and msg tell whether the
// subscription of the request's group accepts it.
type ConsumeQueueData struct {
	BitMap         string `json:"bitMap,omitempty"`
	Eval           bool   `json:"eval"`
	ExtendDataJSON string `json:"extendDataJson,omitempty"`
	Msg            string `json:"msg,omitempty"`
	PhysicOffset   int64  `json:"physicOffset"`
	PhysicSize     int32  `json:"physicSize"`
	TagsCode       int64  `json:"tagsCode"`
}

// QueryConsumeQueueResponseBody answers QUERY_CONSUME_QUEUE (321).
type QueryConsumeQueueResponseBody struct {
	FilterData       string              `json:"filterData,omitempty"`
	MaxQueueIndex    int64               `json:"maxQueueIndex"`
	MinQueueIndex    int64               `json:"minQueueIndex"`
	QueueData        []*ConsumeQueueData `json:"queueData"`
	SubscriptionData *SubscriptionData   `json:"subscriptionData,omitempty"`
}

// QuerySubscriptionResponseBody answers QUERY_SUBSCRIPTION_BY_CONSUMER
// (345); subscriptionData is absent when the group does not subscribe
// the topic.
type QuerySubscriptionResponseBody struct {
	Group            string            `json:"group"`
	SubscriptionData *SubscriptionData `json:"subscriptionData,omitempty"`
	Topic            string            `json:"topic"`
}

// CheckClientRequestBody is the body of CHECK_CLIENT_CONFIG (46).
type CheckClientRequestBody struct {
	ClientID         string            `json:"clientId"`
	Group            string            `json:"group"`
	SubscriptionData *SubscriptionData `json:"subscriptionData"`
}

// ResetOffsetBody answers INVOKE_BROKER_TO_RESET_OFFSET (222) and is the
// body of RESET_CONSUMER_CLIENT_OFFSET (220): the new offset per queue.
type ResetOffsetBody struct {
	OffsetTable MQMap[int64] `json:"offsetTable"`
}

// GetConsumerStatusBody is a client's answer to
// GET_CONSUMER_STATUS_FROM_CLIENT (221: messageQueueTable, its offset per
// queue) and the broker's answer to INVOKE_BROKER_TO_GET_CONSUMER_STATUS
// (223: consumerTable, those tables by client id).
type GetConsumerStatusBody struct {
	ConsumerTable     map[string]MQMap[int64] `json:"consumerTable"`
	MessageQueueTable MQMap[int64]            `json:"messageQueueTable"`
}

// ConsumeStatsList answers GET_BROKER_CONSUME_STATS (317): for each group,
// its ConsumeStats per topic, and the total lag.
type ConsumeStatsList struct {
	BrokerAddr       string                      `json:"brokerAddr"`
	ConsumeStatsList []map[string][]ConsumeStats `json:"consumeStatsList"`
	TotalDiff        int64                       `json:"totalDiff"`
}

func (b ResetOffsetBody) rawJSON() ([]byte, error) {
	var o rawObject
	o.raw("offsetTable", b.OffsetTable.MarshalJSON)
	return o.bytes()
}

func (b GetConsumerStatusBody) rawJSON() ([]byte, error) {
	var o rawObject
	o.raw("consumerTable", func() ([]byte, error) {
		var t rawObject
		keys := make([]string, 0, len(b.ConsumerTable))
		for k := range b.ConsumerTable {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			t.raw(k, b.ConsumerTable[k].MarshalJSON)
		}
		return t.bytes()
	})
	o.raw("messageQueueTable", b.MessageQueueTable.MarshalJSON)
	return o.bytes()
}

func (c ConsumeStatsList) rawJSON() ([]byte, error) {
	var o rawObject
	o.value("brokerAddr", c.BrokerAddr)
	o.raw("consumeStatsList", func() ([]byte, error) {
		var buf bytes.Buffer
		buf.WriteByte('[')
		for i, m := range c.ConsumeStatsList {
			if i > 0 {
				buf.WriteByte(',')
			}
			var groups rawObject
			names := make([]string, 0, len(m))
			for g := range m {
				names = append(names, g)
			}
			sort.Strings(names)
			for _, g := range names {
				groups.raw(g, func() ([]byte, error) {
					var list bytes.Buffer
					list.WriteByte('[')
					for j, cs := range m[g] {
						if j > 0 {
							list.WriteByte(',')
						}
						b, err := cs.rawJSON()
						if err != nil {
							return nil, err
						}
						list.Write(b)
					}
					list.WriteByte(']')
					return list.Bytes(), nil
				})
			}
			b, err := groups.bytes()
			if err != nil {
				return nil, err
			}
			buf.Write(b)
		}
		buf.WriteByte(']')
		return buf.Bytes(), nil
	})
	o.value("totalDiff", c.TotalDiff)
	return o.bytes()
}

// rawObject builds a JSON object whose values may be fastjson's non-standard
// MessageQueue-keyed maps. Keys are written in the order added; the first
// error sticks.
type rawObject struct {
	buf bytes.Buffer
	n   int
	err error
}

func (o *rawObject) key(k string) {
	if o.n == 0 {
		o.buf.WriteByte('{')
	} else {
		o.buf.WriteByte(',')
	}
	o.n++
	kb, _ := json.Marshal(k)
	o.buf.Write(kb)
	o.buf.WriteByte(':')
}

// raw adds a value written by fn.
func (o *rawObject) raw(k string, fn func() ([]byte, error)) {
	if o.err != nil {
		return
	}
	b, err := fn()
	if err != nil {
		o.err = err
		return
	}
	o.key(k)
	o.buf.Write(b)
}

// value adds a value encoding/json writes.
func (o *rawObject) value(k string, v any) {
	o.raw(k, func() ([]byte, error) { return json.Marshal(v) })
}

func (o *rawObject) bytes() ([]byte, error) {
	if o.err != nil {
		return nil, o.err
	}
	if o.n == 0 {
		return []byte("{}"), nil
	}
	o.buf.WriteByte('}')
	return o.buf.Bytes(), nil
}
