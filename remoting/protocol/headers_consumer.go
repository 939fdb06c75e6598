package protocol

// Consumer-side and admin headers of the broker.

// PullSysFlag bits of PullMessageRequestHeader.SysFlag.
const (
	PullFlagCommitOffset int32 = 0x1
	PullFlagSuspend      int32 = 0x2
	PullFlagSubscription int32 = 0x4
	PullFlagClassFilter  int32 = 0x8
	PullFlagLitePull     int32 = 0x10
)

// PullMessageRequestHeader is PULL_MESSAGE (11): consumerGroup!, topic!,
// queueId!, queueOffset!, maxMsgNums!, sysFlag!, commitOffset!,
// suspendTimeoutMillis!, subscription, subVersion!, expressionType.
// SuspendTimeoutMillis stays in milliseconds because it is the wire value;
// SuspendTimeout converts it.
type PullMessageRequestHeader struct {
	ConsumerGroup        string
	Topic                string
	QueueID              int32
	QueueOffset          int64
	MaxMsgNums           int32
	SysFlag              int32
	CommitOffset         int64
	SuspendTimeoutMillis int64
	Subscription         string
	SubVersion           int64
	ExpressionType       string
	BrokerName           string
}

// PullMessageResponseHeader answers PULL_MESSAGE; all four fields are
// always written (Java clients unbox them).
type PullMessageResponseHeader struct {
	SuggestWhichBrokerID int64
	NextBeginOffset      int64
	MinOffset            int64
	MaxOffset            int64
}

// QueryConsumerOffsetRequestHeader is QUERY_CONSUMER_OFFSET (14):
// consumerGroup!, topic!, queueId!, setZeroIfNotFound.
type QueryConsumerOffsetRequestHeader struct {
	ConsumerGroup string
	Topic         string
	QueueID       int32
	// SetZeroIfNotFound false (RocketMQ 5 brokers and proxies send it;
	// absent means true) asks for QUERY_NOT_FOUND rather than offset 0
	// when the group has no offset on the queue.
	SetZeroIfNotFound    bool
	HasSetZeroIfNotFound bool
}

// UpdateConsumerOffsetRequestHeader is UPDATE_CONSUMER_OFFSET (15):
// consumerGroup!, topic!, queueId!, commitOffset!.
type UpdateConsumerOffsetRequestHeader struct {
	ConsumerGroup string
	Topic         string
	QueueID       int32
	CommitOffset  int64
}

// TopicQueueHeader is the header of GET_MAX_OFFSET (30), GET_MIN_OFFSET
// (31) and GET_EARLIEST_MSG_STORETIME (32): topic!, queueId!.
type TopicQueueHeader struct {
	Topic   string
	QueueID int32
}

// Named forms of TopicQueueHeader.
type (
	GetMaxOffsetRequestHeader            = TopicQueueHeader
	GetMinOffsetRequestHeader            = TopicQueueHeader
	GetEarliestMsgStoretimeRequestHeader = TopicQueueHeader
)

// OffsetResponseHeader answers QUERY_CONSUMER_OFFSET, GET_MAX_OFFSET,
// GET_MIN_OFFSET and SEARCH_OFFSET_BY_TIMESTAMP: offset!.
type OffsetResponseHeader struct {
	Offset int64
}

// Named forms of OffsetResponseHeader.
type (
	QueryConsumerOffsetResponseHeader = OffsetResponseHeader
	GetMaxOffsetResponseHeader        = OffsetResponseHeader
	GetMinOffsetResponseHeader        = OffsetResponseHeader
	SearchOffsetResponseHeader        = OffsetResponseHeader
)

// SearchOffsetRequestHeader is SEARCH_OFFSET_BY_TIMESTAMP (29): topic!,
// queueId!, timestamp! (ms), boundaryType (RocketMQ 5: "LOWER", the
// default, or "UPPER", any case; see BoundaryUpper).
type SearchOffsetRequestHeader struct {
	Topic        string
	QueueID      int32
	Timestamp    int64
	BoundaryType string
}

// BoundaryUpper is the boundaryType of a SEARCH_OFFSET_BY_TIMESTAMP asking
// for the last offset stored at or before the timestamp (RocketMQ 5.2's
// DefaultMQAdminExt.searchUpperBoundaryOffset sends it); any other value,
// or none, asks for the first stored at or after it.
const BoundaryUpper = "UPPER"

// GetEarliestMsgStoretimeResponseHeader answers GET_EARLIEST_MSG_STORETIME:
// timestamp! (ms).
type GetEarliestMsgStoretimeResponseHeader struct {
	Timestamp int64
}

// ViewMessageRequestHeader is VIEW_MESSAGE_BY_ID (33): offset! (commitlog
// physical offset).
type ViewMessageRequestHeader struct {
	Offset int64
}

// QueryMessageRequestHeader is QUERY_MESSAGE (12): topic!, key!, maxNum!,
// beginTimestamp!, endTimestamp!, plus the extField _UNIQUE_KEY_QUERY.
type QueryMessageRequestHeader struct {
	Topic          string
	Key            string
	MaxNum         int32
	BeginTimestamp int64
	EndTimestamp   int64
	UniqueKeyQuery bool
}

// QueryMessageResponseHeader answers QUERY_MESSAGE:
// indexLastUpdateTimestamp!, indexLastUpdatePhyoffset!.
type QueryMessageResponseHeader struct {
	IndexLastUpdateTimestamp int64
	IndexLastUpdatePhyoffset int64
}

// ConsumerSendMsgBackRequestHeader is CONSUMER_SEND_MSG_BACK (36): offset!,
// group!, delayLevel!, originMsgId, originTopic, unitMode,
// maxReconsumeTimes.
type ConsumerSendMsgBackRequestHeader struct {
	Offset               int64
	Group                string
	DelayLevel           int32
	OriginMsgID          string
	OriginTopic          string
	UnitMode             bool
	MaxReconsumeTimes    int32
	HasMaxReconsumeTimes bool
}

// UnregisterClientRequestHeader is UNREGISTER_CLIENT (35): clientID!,
// producerGroup, consumerGroup.
type UnregisterClientRequestHeader struct {
	ClientID      string
	ProducerGroup string
	ConsumerGroup string
}

// ConsumerGroupHeader is the header of GET_CONSUMER_LIST_BY_GROUP (38) and
// NOTIFY_CONSUMER_IDS_CHANGED (40): consumerGroup!.
type ConsumerGroupHeader struct {
	ConsumerGroup string
}

// Named forms of ConsumerGroupHeader.
type (
	GetConsumerListByGroupRequestHeader   = ConsumerGroupHeader
	NotifyConsumerIDsChangedRequestHeader = ConsumerGroupHeader
)

// CreateTopicRequestHeader is UPDATE_AND_CREATE_TOPIC (17): topic!,
// defaultTopic!, readQueueNums!, writeQueueNums!, perm!, topicFilterType!,
// topicSysFlag, order!.
type CreateTopicRequestHeader struct {
	Topic           string
	DefaultTopic    string
	ReadQueueNums   int32
	WriteQueueNums  int32
	Perm            int32
	TopicFilterType string
	TopicSysFlag    int32
	Order           bool
}

// DeleteTopicRequestHeader is DELETE_TOPIC_IN_BROKER (215): topic!.
type DeleteTopicRequestHeader struct {
	Topic string
}
