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

// EncodeFields implements HeaderEncoder.
func (h *PullMessageRequestHeader) EncodeFields(f ExtFields) {
	f["consumerGroup"] = h.ConsumerGroup
	f["topic"] = h.Topic
	putI32(f, "queueId", h.QueueID)
	putI64(f, "queueOffset", h.QueueOffset)
	putI32(f, "maxMsgNums", h.MaxMsgNums)
	putI32(f, "sysFlag", h.SysFlag)
	putI64(f, "commitOffset", h.CommitOffset)
	putI64(f, "suspendTimeoutMillis", h.SuspendTimeoutMillis)
	putOptStr(f, "subscription", h.Subscription)
	putI64(f, "subVersion", h.SubVersion)
	putOptStr(f, "expressionType", h.ExpressionType)
	putOptStr(f, "bname", h.BrokerName)
}

// DecodeFields implements HeaderDecoder.
func (h *PullMessageRequestHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "PullMessageRequestHeader"}
	h.ConsumerGroup = r.str("consumerGroup", true)
	h.Topic = r.str("topic", true)
	h.QueueID = r.i32("queueId", true)
	h.QueueOffset = r.i64("queueOffset", true)
	h.MaxMsgNums = r.i32("maxMsgNums", true)
	h.SysFlag = r.i32("sysFlag", true)
	h.CommitOffset = r.i64("commitOffset", true)
	h.SuspendTimeoutMillis = r.i64("suspendTimeoutMillis", true)
	h.Subscription = r.str("subscription", false)
	h.SubVersion = r.i64("subVersion", true)
	h.ExpressionType = r.str("expressionType", false)
	h.BrokerName = r.str("bname", false)
	return r.err
}

// PullMessageResponseHeader answers PULL_MESSAGE; all four fields are
// always written (Java clients unbox them).
type PullMessageResponseHeader struct {
	SuggestWhichBrokerID int64
	NextBeginOffset      int64
	MinOffset            int64
	MaxOffset            int64
}

// EncodeFields implements HeaderEncoder.
func (h *PullMessageResponseHeader) EncodeFields(f ExtFields) {
	putI64(f, "suggestWhichBrokerId", h.SuggestWhichBrokerID)
	putI64(f, "nextBeginOffset", h.NextBeginOffset)
	putI64(f, "minOffset", h.MinOffset)
	putI64(f, "maxOffset", h.MaxOffset)
}

// DecodeFields implements HeaderDecoder.
func (h *PullMessageResponseHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "PullMessageResponseHeader"}
	h.SuggestWhichBrokerID = r.i64("suggestWhichBrokerId", true)
	h.NextBeginOffset = r.i64("nextBeginOffset", true)
	h.MinOffset = r.i64("minOffset", true)
	h.MaxOffset = r.i64("maxOffset", true)
	return r.err
}

// QueryConsumerOffsetRequestHeader is QUERY_CONSUMER_OFFSET (14):
// consumerGroup!, topic!, queueId!.
type QueryConsumerOffsetRequestHeader struct {
	ConsumerGroup string
	Topic         string
	QueueID       int32
}

// EncodeFields implements HeaderEncoder.
func (h *QueryConsumerOffsetRequestHeader) EncodeFields(f ExtFields) {
	f["consumerGroup"] = h.ConsumerGroup
	f["topic"] = h.Topic
	putI32(f, "queueId", h.QueueID)
}

// DecodeFields implements HeaderDecoder.
func (h *QueryConsumerOffsetRequestHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "QueryConsumerOffsetRequestHeader"}
	h.ConsumerGroup = r.str("consumerGroup", true)
	h.Topic = r.str("topic", true)
	h.QueueID = r.i32("queueId", true)
	return r.err
}

// UpdateConsumerOffsetRequestHeader is UPDATE_CONSUMER_OFFSET (15):
// consumerGroup!, topic!, queueId!, commitOffset!.
type UpdateConsumerOffsetRequestHeader struct {
	ConsumerGroup string
	Topic         string
	QueueID       int32
	CommitOffset  int64
}

// EncodeFields implements HeaderEncoder.
func (h *UpdateConsumerOffsetRequestHeader) EncodeFields(f ExtFields) {
	f["consumerGroup"] = h.ConsumerGroup
	f["topic"] = h.Topic
	putI32(f, "queueId", h.QueueID)
	putI64(f, "commitOffset", h.CommitOffset)
}

// DecodeFields implements HeaderDecoder.
func (h *UpdateConsumerOffsetRequestHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "UpdateConsumerOffsetRequestHeader"}
	h.ConsumerGroup = r.str("consumerGroup", true)
	h.Topic = r.str("topic", true)
	h.QueueID = r.i32("queueId", true)
	h.CommitOffset = r.i64("commitOffset", true)
	return r.err
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

// EncodeFields implements HeaderEncoder.
func (h *TopicQueueHeader) EncodeFields(f ExtFields) {
	f["topic"] = h.Topic
	putI32(f, "queueId", h.QueueID)
}

// DecodeFields implements HeaderDecoder.
func (h *TopicQueueHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "TopicQueueHeader"}
	h.Topic = r.str("topic", true)
	h.QueueID = r.i32("queueId", true)
	return r.err
}

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

// EncodeFields implements HeaderEncoder.
func (h *OffsetResponseHeader) EncodeFields(f ExtFields) { putI64(f, "offset", h.Offset) }

// DecodeFields implements HeaderDecoder.
func (h *OffsetResponseHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "OffsetResponseHeader"}
	h.Offset = r.i64("offset", true)
	return r.err
}

// SearchOffsetRequestHeader is SEARCH_OFFSET_BY_TIMESTAMP (29): topic!,
// queueId!, timestamp! (ms).
type SearchOffsetRequestHeader struct {
	Topic     string
	QueueID   int32
	Timestamp int64
}

// EncodeFields implements HeaderEncoder.
func (h *SearchOffsetRequestHeader) EncodeFields(f ExtFields) {
	f["topic"] = h.Topic
	putI32(f, "queueId", h.QueueID)
	putI64(f, "timestamp", h.Timestamp)
}

// DecodeFields implements HeaderDecoder.
func (h *SearchOffsetRequestHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "SearchOffsetRequestHeader"}
	h.Topic = r.str("topic", true)
	h.QueueID = r.i32("queueId", true)
	h.Timestamp = r.i64("timestamp", true)
	return r.err
}

// GetEarliestMsgStoretimeResponseHeader answers GET_EARLIEST_MSG_STORETIME:
// timestamp! (ms).
type GetEarliestMsgStoretimeResponseHeader struct {
	Timestamp int64
}

// EncodeFields implements HeaderEncoder.
func (h *GetEarliestMsgStoretimeResponseHeader) EncodeFields(f ExtFields) {
	putI64(f, "timestamp", h.Timestamp)
}

// DecodeFields implements HeaderDecoder.
func (h *GetEarliestMsgStoretimeResponseHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "GetEarliestMsgStoretimeResponseHeader"}
	h.Timestamp = r.i64("timestamp", true)
	return r.err
}

// ViewMessageRequestHeader is VIEW_MESSAGE_BY_ID (33): offset! (commitlog
// physical offset).
type ViewMessageRequestHeader struct {
	Offset int64
}

// EncodeFields implements HeaderEncoder.
func (h *ViewMessageRequestHeader) EncodeFields(f ExtFields) { putI64(f, "offset", h.Offset) }

// DecodeFields implements HeaderDecoder.
func (h *ViewMessageRequestHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "ViewMessageRequestHeader"}
	h.Offset = r.i64("offset", true)
	return r.err
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

// EncodeFields implements HeaderEncoder.
func (h *QueryMessageRequestHeader) EncodeFields(f ExtFields) {
	f["topic"] = h.Topic
	f["key"] = h.Key
	putI32(f, "maxNum", h.MaxNum)
	putI64(f, "beginTimestamp", h.BeginTimestamp)
	putI64(f, "endTimestamp", h.EndTimestamp)
	putBool(f, "_UNIQUE_KEY_QUERY", h.UniqueKeyQuery)
}

// DecodeFields implements HeaderDecoder.
func (h *QueryMessageRequestHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "QueryMessageRequestHeader"}
	h.Topic = r.str("topic", true)
	h.Key = r.str("key", true)
	h.MaxNum = r.i32("maxNum", true)
	h.BeginTimestamp = r.i64("beginTimestamp", true)
	h.EndTimestamp = r.i64("endTimestamp", true)
	h.UniqueKeyQuery = r.boolean("_UNIQUE_KEY_QUERY", false)
	return r.err
}

// QueryMessageResponseHeader answers QUERY_MESSAGE:
// indexLastUpdateTimestamp!, indexLastUpdatePhyoffset!.
type QueryMessageResponseHeader struct {
	IndexLastUpdateTimestamp int64
	IndexLastUpdatePhyoffset int64
}

// EncodeFields implements HeaderEncoder.
func (h *QueryMessageResponseHeader) EncodeFields(f ExtFields) {
	putI64(f, "indexLastUpdateTimestamp", h.IndexLastUpdateTimestamp)
	putI64(f, "indexLastUpdatePhyoffset", h.IndexLastUpdatePhyoffset)
}

// DecodeFields implements HeaderDecoder.
func (h *QueryMessageResponseHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "QueryMessageResponseHeader"}
	h.IndexLastUpdateTimestamp = r.i64("indexLastUpdateTimestamp", true)
	h.IndexLastUpdatePhyoffset = r.i64("indexLastUpdatePhyoffset", true)
	return r.err
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

// EncodeFields implements HeaderEncoder.
func (h *ConsumerSendMsgBackRequestHeader) EncodeFields(f ExtFields) {
	putI64(f, "offset", h.Offset)
	f["group"] = h.Group
	putI32(f, "delayLevel", h.DelayLevel)
	putOptStr(f, "originMsgId", h.OriginMsgID)
	putOptStr(f, "originTopic", h.OriginTopic)
	putBool(f, "unitMode", h.UnitMode)
	if h.HasMaxReconsumeTimes {
		putI32(f, "maxReconsumeTimes", h.MaxReconsumeTimes)
	}
}

// DecodeFields implements HeaderDecoder.
func (h *ConsumerSendMsgBackRequestHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "ConsumerSendMsgBackRequestHeader"}
	h.Offset = r.i64("offset", true)
	h.Group = r.str("group", true)
	h.DelayLevel = r.i32("delayLevel", true)
	h.OriginMsgID = r.str("originMsgId", false)
	h.OriginTopic = r.str("originTopic", false)
	h.UnitMode = r.boolean("unitMode", false)
	h.MaxReconsumeTimes, h.HasMaxReconsumeTimes = r.optI32("maxReconsumeTimes")
	return r.err
}

// UnregisterClientRequestHeader is UNREGISTER_CLIENT (35): clientID!,
// producerGroup, consumerGroup.
type UnregisterClientRequestHeader struct {
	ClientID      string
	ProducerGroup string
	ConsumerGroup string
}

// EncodeFields implements HeaderEncoder.
func (h *UnregisterClientRequestHeader) EncodeFields(f ExtFields) {
	f["clientID"] = h.ClientID
	putOptStr(f, "producerGroup", h.ProducerGroup)
	putOptStr(f, "consumerGroup", h.ConsumerGroup)
}

// DecodeFields implements HeaderDecoder.
func (h *UnregisterClientRequestHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "UnregisterClientRequestHeader"}
	h.ClientID = r.str("clientID", true)
	h.ProducerGroup = r.str("producerGroup", false)
	h.ConsumerGroup = r.str("consumerGroup", false)
	return r.err
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

// EncodeFields implements HeaderEncoder.
func (h *ConsumerGroupHeader) EncodeFields(f ExtFields) { f["consumerGroup"] = h.ConsumerGroup }

// DecodeFields implements HeaderDecoder.
func (h *ConsumerGroupHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "ConsumerGroupHeader"}
	h.ConsumerGroup = r.str("consumerGroup", true)
	return r.err
}

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

// EncodeFields implements HeaderEncoder.
func (h *CreateTopicRequestHeader) EncodeFields(f ExtFields) {
	f["topic"] = h.Topic
	f["defaultTopic"] = h.DefaultTopic
	putI32(f, "readQueueNums", h.ReadQueueNums)
	putI32(f, "writeQueueNums", h.WriteQueueNums)
	putI32(f, "perm", h.Perm)
	f["topicFilterType"] = h.TopicFilterType
	putI32(f, "topicSysFlag", h.TopicSysFlag)
	putBool(f, "order", h.Order)
}

// DecodeFields implements HeaderDecoder.
func (h *CreateTopicRequestHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "CreateTopicRequestHeader"}
	h.Topic = r.str("topic", true)
	h.DefaultTopic = r.str("defaultTopic", true)
	h.ReadQueueNums = r.i32("readQueueNums", true)
	h.WriteQueueNums = r.i32("writeQueueNums", true)
	h.Perm = r.i32("perm", true)
	h.TopicFilterType = r.str("topicFilterType", true)
	h.TopicSysFlag = r.i32("topicSysFlag", false)
	h.Order = r.boolean("order", true)
	return r.err
}

// DeleteTopicRequestHeader is DELETE_TOPIC_IN_BROKER (215): topic!.
type DeleteTopicRequestHeader struct {
	Topic string
}

// EncodeFields implements HeaderEncoder.
func (h *DeleteTopicRequestHeader) EncodeFields(f ExtFields) { f["topic"] = h.Topic }

// DecodeFields implements HeaderDecoder.
func (h *DeleteTopicRequestHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "DeleteTopicRequestHeader"}
	h.Topic = r.str("topic", true)
	return r.err
}
