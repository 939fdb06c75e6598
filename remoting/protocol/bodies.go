package protocol

import "encoding/json"

// Bodies exchanged as JSON. Fields are declared in alphabetical JSON-key
// order so encoding/json writes them in fastjson's order. Decode with
// DecodeJSON (tolerates fastjson's bare numeric map keys), encode with
// EncodeJSON.

// QueueData describes a topic's queues on one broker name.
type QueueData struct {
	BrokerName     string `json:"brokerName"`
	Perm           int32  `json:"perm"`
	ReadQueueNums  int32  `json:"readQueueNums"`
	TopicSysFlag   int32  `json:"topicSysFlag"`
	WriteQueueNums int32  `json:"writeQueueNums"`
}

// BrokerData describes a broker name: its cluster and the address of each
// broker id (0 = master). BrokerAddrs is written with quoted numeric keys.
type BrokerData struct {
	BrokerAddrs map[int64]string `json:"brokerAddrs"`
	BrokerName  string           `json:"brokerName"`
	Cluster     string           `json:"cluster"`
}

// MarshalJSON writes brokerAddrs as {} rather than null when empty.
func (b BrokerData) MarshalJSON() ([]byte, error) {
	type plain BrokerData
	if b.BrokerAddrs == nil {
		b.BrokerAddrs = map[int64]string{}
	}
	return json.Marshal(plain(b))
}

// MasterAddr returns the address of broker id 0, or "".
func (b *BrokerData) MasterAddr() string { return b.BrokerAddrs[MasterID] }

// Clone returns a deep copy.
func (b *BrokerData) Clone() *BrokerData {
	c := &BrokerData{BrokerName: b.BrokerName, Cluster: b.Cluster, BrokerAddrs: make(map[int64]string, len(b.BrokerAddrs))}
	for k, v := range b.BrokerAddrs {
		c.BrokerAddrs[k] = v
	}
	return c
}

// TopicRouteData answers GET_ROUTEINFO_BY_TOPIC. filterServerTable is
// always written ({} when empty) and orderTopicConf only when set.
type TopicRouteData struct {
	BrokerDatas       []*BrokerData       `json:"brokerDatas"`
	FilterServerTable map[string][]string `json:"filterServerTable"`
	OrderTopicConf    string              `json:"orderTopicConf,omitempty"`
	QueueDatas        []*QueueData        `json:"queueDatas"`
}

// MarshalJSON writes empty tables as {} and [] rather than null.
func (t TopicRouteData) MarshalJSON() ([]byte, error) {
	type plain TopicRouteData
	if t.FilterServerTable == nil {
		t.FilterServerTable = map[string][]string{}
	}
	if t.BrokerDatas == nil {
		t.BrokerDatas = []*BrokerData{}
	}
	if t.QueueDatas == nil {
		t.QueueDatas = []*QueueData{}
	}
	return json.Marshal(plain(t))
}

// ClusterInfo answers GET_BROKER_CLUSTER_INFO.
type ClusterInfo struct {
	BrokerAddrTable  map[string]*BrokerData `json:"brokerAddrTable"`
	ClusterAddrTable map[string][]string    `json:"clusterAddrTable"`
}

// DataVersion identifies a broker's topic configuration state.
type DataVersion struct {
	Counter   int64 `json:"counter"`
	Timestamp int64 `json:"timestamp"`
}

// TopicConfig is a topic's configuration as brokers register and serve it.
type TopicConfig struct {
	Order           bool   `json:"order"`
	Perm            int32  `json:"perm"`
	ReadQueueNums   int32  `json:"readQueueNums"`
	TopicFilterType string `json:"topicFilterType"`
	TopicName       string `json:"topicName"`
	TopicSysFlag    int32  `json:"topicSysFlag"`
	WriteQueueNums  int32  `json:"writeQueueNums"`
}

// Topic filter types.
const (
	TopicFilterSingleTag = "SINGLE_TAG"
	TopicFilterMultiTag  = "MULTI_TAG"
)

// TopicConfigSerializeWrapper is the body of GET_ALL_TOPIC_CONFIG and part
// of RegisterBrokerBody.
type TopicConfigSerializeWrapper struct {
	DataVersion      DataVersion             `json:"dataVersion"`
	TopicConfigTable map[string]*TopicConfig `json:"topicConfigTable"`
}

// RegisterBrokerBody is the (uncompressed) body of REGISTER_BROKER.
type RegisterBrokerBody struct {
	FilterServerList            []string                    `json:"filterServerList"`
	TopicConfigSerializeWrapper TopicConfigSerializeWrapper `json:"topicConfigSerializeWrapper"`
}

// MarshalJSON writes an empty filter server list as [].
func (r RegisterBrokerBody) MarshalJSON() ([]byte, error) {
	type plain RegisterBrokerBody
	if r.FilterServerList == nil {
		r.FilterServerList = []string{}
	}
	if r.TopicConfigSerializeWrapper.TopicConfigTable == nil {
		r.TopicConfigSerializeWrapper.TopicConfigTable = map[string]*TopicConfig{}
	}
	return json.Marshal(plain(r))
}

// KVTable is a namespace's key/value list: {"table":{...}}.
type KVTable struct {
	Table map[string]string `json:"table"`
}

// MarshalJSON writes an empty table as {}.
func (k KVTable) MarshalJSON() ([]byte, error) {
	type plain KVTable
	if k.Table == nil {
		k.Table = map[string]string{}
	}
	return json.Marshal(plain(k))
}

// TopicList answers GET_ALL_TOPIC_LIST_FROM_NAMESERVER and
// GET_TOPICS_BY_CLUSTER.
type TopicList struct {
	BrokerAddr string   `json:"brokerAddr,omitempty"`
	TopicList  []string `json:"topicList"`
}

// MarshalJSON writes an empty list as [].
func (t TopicList) MarshalJSON() ([]byte, error) {
	type plain TopicList
	if t.TopicList == nil {
		t.TopicList = []string{}
	}
	return json.Marshal(plain(t))
}

// MessageQueue names one queue.
type MessageQueue struct {
	BrokerName string `json:"brokerName"`
	QueueID    int32  `json:"queueId"`
	Topic      string `json:"topic"`
}

// SubscriptionData is one subscription of a consumer group.
type SubscriptionData struct {
	ClassFilterMode bool     `json:"classFilterMode"`
	CodeSet         []int32  `json:"codeSet"`
	ExpressionType  string   `json:"expressionType"`
	SubString       string   `json:"subString"`
	SubVersion      int64    `json:"subVersion"`
	TagsSet         []string `json:"tagsSet"`
	Topic           string   `json:"topic"`
}

// ConsumerData is one consumer group of a heartbeat.
type ConsumerData struct {
	ConsumeFromWhere    string              `json:"consumeFromWhere"`
	ConsumeType         string              `json:"consumeType"`
	GroupName           string              `json:"groupName"`
	MessageModel        string              `json:"messageModel"`
	SubscriptionDataSet []*SubscriptionData `json:"subscriptionDataSet"`
	UnitMode            bool                `json:"unitMode"`
}

// Consumer enum values as they appear in ConsumerData.
const (
	ConsumeActively          = "CONSUME_ACTIVELY"
	ConsumePassively         = "CONSUME_PASSIVELY"
	MessageModelClustering   = "CLUSTERING"
	MessageModelBroadcasting = "BROADCASTING"
	ConsumeFromLastOffset    = "CONSUME_FROM_LAST_OFFSET"
	ConsumeFromFirstOffset   = "CONSUME_FROM_FIRST_OFFSET"
	ConsumeFromTimestamp     = "CONSUME_FROM_TIMESTAMP"
	ExpressionTypeTag        = "TAG"
	ExpressionTypeSQL92      = "SQL92"
	SubscriptionAll          = "*"
)

// ProducerData is one producer group of a heartbeat.
type ProducerData struct {
	GroupName string `json:"groupName"`
}

// HeartbeatData is the body of HEART_BEAT.
//
// RocketMQ 5 clients with heartbeat v2 on also send HeartbeatFingerprint
// (a hash of their heartbeat without subscription versions; 0: v1) and,
// once a broker answered IS_SUPPORT_HEART_BEAT_V2 and took their
// fingerprint, WithoutSub heartbeats: the consumer groups without their
// subscriptions, which the broker keeps from the last full heartbeat.
type HeartbeatData struct {
	ClientID             string          `json:"clientID"`
	ConsumerDataSet      []*ConsumerData `json:"consumerDataSet"`
	ProducerDataSet      []*ProducerData `json:"producerDataSet"`
	HeartbeatFingerprint int32           `json:"heartbeatFingerprint,omitempty"`
	WithoutSub           bool            `json:"withoutSub,omitempty"`
}

// Extension fields of a HEART_BEAT response to a client that sent a
// heartbeat fingerprint (heartbeat v2): whether the broker takes
// WithoutSub heartbeats, and whether the client must send its
// subscriptions again ("true" or "false").
const (
	HeartbeatV2Supported = "IS_SUPPORT_HEART_BEAT_V2"
	HeartbeatSubChanged  = "IS_SUB_CHANGE"
)

// LockBatchRequestBody is the body of LOCK_BATCH_MQ and UNLOCK_BATCH_MQ.
type LockBatchRequestBody struct {
	ClientID       string          `json:"clientId"`
	ConsumerGroup  string          `json:"consumerGroup"`
	MQSet          []*MessageQueue `json:"mqSet"`
	OnlyThisBroker bool            `json:"onlyThisBroker"`
}

// UnlockBatchRequestBody is the body of UNLOCK_BATCH_MQ.
type UnlockBatchRequestBody = LockBatchRequestBody

// LockBatchResponseBody answers LOCK_BATCH_MQ.
type LockBatchResponseBody struct {
	LockOKMQSet []*MessageQueue `json:"lockOKMQSet"`
}

// MarshalJSON writes an empty set as [].
func (l LockBatchResponseBody) MarshalJSON() ([]byte, error) {
	type plain LockBatchResponseBody
	if l.LockOKMQSet == nil {
		l.LockOKMQSet = []*MessageQueue{}
	}
	return json.Marshal(plain(l))
}

// ConsumerIDList answers GET_CONSUMER_LIST_BY_GROUP.
type ConsumerIDList struct {
	ConsumerIDList []string `json:"consumerIdList"`
}

// ConsumerOffsetSerializeWrapper is the body of GET_ALL_CONSUMER_OFFSET:
// "topic@group" -> queue id -> offset. Java writes the queue ids as bare
// numbers; DecodeJSON accepts both forms, EncodeJSON quotes them.
type ConsumerOffsetSerializeWrapper struct {
	OffsetTable map[string]map[int32]int64 `json:"offsetTable"`
}
