package headergen

// Headers is the table the typed headers' EncodeFields and DecodeFields
// methods (remoting/protocol/headers_gen.go) are generated from: each
// header's Go type and its extFields, in the order they are read. The
// structs themselves, with their documentation, stay hand-written beside
// the requests they belong to; a field named here must exist there with
// the Go type of its Kind (the generated code does not compile otherwise).
var Headers = []Header{
	// headers_namesrv.go
	{Type: "RegisterBrokerRequestHeader", Fields: []Field{
		{Go: "BrokerName", Key: "brokerName", Kind: Str, Req: Required},
		{Go: "BrokerAddr", Key: "brokerAddr", Kind: Str, Req: Required},
		{Go: "ClusterName", Key: "clusterName", Kind: Str, Req: Required},
		{Go: "HAServerAddr", Key: "haServerAddr", Kind: Str, Req: Required},
		{Go: "BrokerID", Key: "brokerId", Kind: I64, Req: Required},
		{Go: "Compressed", Key: "compressed", Kind: Bool},
		{Go: "BodyCRC32", Key: "bodyCrc32", Kind: I32},
	}},
	{Type: "RegisterBrokerResponseHeader", Fields: []Field{
		{Go: "HAServerAddr", Key: "haServerAddr", Kind: Str},
		{Go: "MasterAddr", Key: "masterAddr", Kind: Str},
	}},
	{Type: "BrokerIdentityHeader", Fields: []Field{
		{Go: "BrokerName", Key: "brokerName", Kind: Str, Req: Required},
		{Go: "BrokerAddr", Key: "brokerAddr", Kind: Str, Req: Required},
		{Go: "ClusterName", Key: "clusterName", Kind: Str, Req: Required},
		{Go: "BrokerID", Key: "brokerId", Kind: I64, Req: Required},
	}},
	{Type: "QueryDataVersionResponseHeader", Fields: []Field{
		{Go: "Changed", Key: "changed", Kind: Bool, Req: Required},
	}},
	{Type: "GetRouteInfoRequestHeader", Fields: []Field{
		{Go: "Topic", Key: "topic", Kind: Str, Req: Required},
		{Go: "AcceptStandardJSONOnly", Key: "acceptStandardJsonOnly", Kind: Bool, If: "h.AcceptStandardJSONOnly"},
	}},
	{Type: "KVConfigRequestHeader", Fields: []Field{
		{Go: "Namespace", Key: "namespace", Kind: Str, Req: Required},
		{Go: "Key", Key: "key", Kind: Str, Req: "h.Code != GetKVListByNamespace", If: "h.Code != GetKVListByNamespace"},
		{Go: "Value", Key: "value", Kind: Str, Req: "h.Code == PutKVConfig", If: "h.Code == PutKVConfig"},
	}},
	{Type: "GetKVConfigResponseHeader", Fields: []Field{
		{Go: "Value", Key: "value", Kind: Str, Always: true},
	}},
	{Type: "GetTopicsByClusterRequestHeader", Fields: []Field{
		{Go: "Cluster", Key: "cluster", Kind: Str, Req: Required},
	}},
	{Type: "BrokerPermRequestHeader", Fields: []Field{
		{Go: "BrokerName", Key: "brokerName", Kind: Str, Req: Required},
	}},
	{Type: "WipeWritePermResponseHeader", Fields: []Field{
		{Go: "WipeTopicCount", Key: "wipeTopicCount", Kind: I32, Req: Required},
	}},
	{Type: "AddWritePermResponseHeader", Fields: []Field{
		{Go: "AddTopicCount", Key: "addTopicCount", Kind: I32, Req: Required},
	}},
	{Type: "DeleteTopicInNamesrvRequestHeader", Fields: []Field{
		{Go: "Topic", Key: "topic", Kind: Str, Req: Required},
		{Go: "ClusterName", Key: "clusterName", Kind: Str},
	}},
	// headers_send.go
	{Type: "SendMessageRequestHeader", Direct: true, Shaped: true, Fields: []Field{
		{Go: "ProducerGroup", Key: "producerGroup", Kind: Str, Req: Required},
		{Go: "Topic", Key: "topic", Kind: Str, Req: Required},
		{Go: "DefaultTopic", Key: "defaultTopic", Kind: Str, Req: Required},
		{Go: "DefaultTopicQueueNums", Key: "defaultTopicQueueNums", Kind: I32, Req: Required},
		{Go: "QueueID", Key: "queueId", Kind: I32, Req: Required},
		{Go: "SysFlag", Key: "sysFlag", Kind: I32, Req: Required},
		{Go: "BornTimestamp", Key: "bornTimestamp", Kind: I64, Req: Required},
		{Go: "Flag", Key: "flag", Kind: I32, Req: Required},
		{Go: "Properties", Key: "properties", Kind: Str},
		{Go: "ReconsumeTimes", Key: "reconsumeTimes", Kind: I32},
		{Go: "UnitMode", Key: "unitMode", Kind: Bool},
		{Go: "Batch", Key: "batch", Kind: Bool},
		{Go: "MaxReconsumeTimes", Key: "maxReconsumeTimes", Kind: I32, Has: "HasMaxReconsumeTimes"},
		{Go: "BrokerName", Key: "bname", Kind: Str},
		{Go: "Resend", Key: "sgResend", Kind: Bool, If: "h.Resend"},
	}},
	{Type: "SendMessageRequestHeaderV2", Direct: true, Shaped: true, Fields: []Field{
		{Go: "ProducerGroup", Key: "a", Kind: Str, Req: Required},
		{Go: "Topic", Key: "b", Kind: Str, Req: Required},
		{Go: "DefaultTopic", Key: "c", Kind: Str, Req: Required},
		{Go: "DefaultTopicQueueNums", Key: "d", Kind: I32, Req: Required},
		{Go: "QueueID", Key: "e", Kind: I32, Req: Required},
		{Go: "SysFlag", Key: "f", Kind: I32, Req: Required},
		{Go: "BornTimestamp", Key: "g", Kind: I64, Req: Required},
		{Go: "Flag", Key: "h", Kind: I32, Req: Required},
		{Go: "Properties", Key: "i", Kind: Str},
		{Go: "ReconsumeTimes", Key: "j", Kind: I32},
		{Go: "UnitMode", Key: "k", Kind: Bool},
		{Go: "MaxReconsumeTimes", Key: "l", Kind: I32, Has: "HasMaxReconsumeTimes"},
		{Go: "Batch", Key: "m", Kind: Bool},
		{Go: "BrokerName", Key: "n", Kind: Str},
		{Go: "Resend", Key: "sgResend", Kind: Bool, If: "h.Resend"},
	}},
	{Type: "SendMessageResponseHeader", Direct: true, OwnWriter: true, Fields: []Field{
		{Go: "MsgID", Key: "msgId", Kind: Str, Req: Required},
		{Go: "QueueID", Key: "queueId", Kind: I32, Req: Required},
		{Go: "QueueOffset", Key: "queueOffset", Kind: I64, Req: Required},
		{Go: "TransactionID", Key: "transactionId", Kind: Str},
		{Go: "Region", Key: "MSG_REGION", Kind: Str, If: "h.Region != \"\""},
		{Go: "TraceOn", Key: "TRACE_ON", Kind: Bool, If: "h.Region != \"\""},
	}},
	{Type: "EndTransactionRequestHeader", Fields: []Field{
		{Go: "ProducerGroup", Key: "producerGroup", Kind: Str, Req: Required},
		{Go: "TranStateTableOffset", Key: "tranStateTableOffset", Kind: I64, Req: Required},
		{Go: "CommitLogOffset", Key: "commitLogOffset", Kind: I64, Req: Required},
		{Go: "CommitOrRollback", Key: "commitOrRollback", Kind: I32, Req: Required},
		{Go: "FromTransactionCheck", Key: "fromTransactionCheck", Kind: Bool},
		{Go: "MsgID", Key: "msgId", Kind: Str, Req: Required},
		{Go: "TransactionID", Key: "transactionId", Kind: Str},
	}},
	{Type: "CheckTransactionStateRequestHeader", Fields: []Field{
		{Go: "TranStateTableOffset", Key: "tranStateTableOffset", Kind: I64, Req: Required},
		{Go: "CommitLogOffset", Key: "commitLogOffset", Kind: I64, Req: Required},
		{Go: "MsgID", Key: "msgId", Kind: Str},
		{Go: "TransactionID", Key: "transactionId", Kind: Str},
		{Go: "OffsetMsgID", Key: "offsetMsgId", Kind: Str},
	}},
	// headers_consumer.go
	{Type: "PullMessageRequestHeader", Direct: true, Fields: []Field{
		{Go: "ConsumerGroup", Key: "consumerGroup", Kind: Str, Req: Required},
		{Go: "Topic", Key: "topic", Kind: Str, Req: Required},
		{Go: "QueueID", Key: "queueId", Kind: I32, Req: Required},
		{Go: "QueueOffset", Key: "queueOffset", Kind: I64, Req: Required},
		{Go: "MaxMsgNums", Key: "maxMsgNums", Kind: I32, Req: Required},
		{Go: "SysFlag", Key: "sysFlag", Kind: I32, Req: Required},
		{Go: "CommitOffset", Key: "commitOffset", Kind: I64, Req: Required},
		{Go: "SuspendTimeoutMillis", Key: "suspendTimeoutMillis", Kind: I64, Req: Required},
		{Go: "Subscription", Key: "subscription", Kind: Str},
		{Go: "SubVersion", Key: "subVersion", Kind: I64, Req: Required},
		{Go: "ExpressionType", Key: "expressionType", Kind: Str},
		{Go: "BrokerName", Key: "bname", Kind: Str},
	}},
	{Type: "PullMessageResponseHeader", Direct: true, Fields: []Field{
		{Go: "SuggestWhichBrokerID", Key: "suggestWhichBrokerId", Kind: I64, Req: Required},
		{Go: "NextBeginOffset", Key: "nextBeginOffset", Kind: I64, Req: Required},
		{Go: "MinOffset", Key: "minOffset", Kind: I64, Req: Required},
		{Go: "MaxOffset", Key: "maxOffset", Kind: I64, Req: Required},
	}},
	{Type: "QueryConsumerOffsetRequestHeader", Fields: []Field{
		{Go: "ConsumerGroup", Key: "consumerGroup", Kind: Str, Req: Required},
		{Go: "Topic", Key: "topic", Kind: Str, Req: Required},
		{Go: "QueueID", Key: "queueId", Kind: I32, Req: Required},
		{Go: "SetZeroIfNotFound", Key: "setZeroIfNotFound", Kind: Bool, Has: "HasSetZeroIfNotFound"},
	}},
	{Type: "UpdateConsumerOffsetRequestHeader", Fields: []Field{
		{Go: "ConsumerGroup", Key: "consumerGroup", Kind: Str, Req: Required},
		{Go: "Topic", Key: "topic", Kind: Str, Req: Required},
		{Go: "QueueID", Key: "queueId", Kind: I32, Req: Required},
		{Go: "CommitOffset", Key: "commitOffset", Kind: I64, Req: Required},
	}},
	{Type: "TopicQueueHeader", Fields: []Field{
		{Go: "Topic", Key: "topic", Kind: Str, Req: Required},
		{Go: "QueueID", Key: "queueId", Kind: I32, Req: Required},
	}},
	{Type: "OffsetResponseHeader", Fields: []Field{
		{Go: "Offset", Key: "offset", Kind: I64, Req: Required},
	}},
	{Type: "SearchOffsetRequestHeader", Fields: []Field{
		{Go: "Topic", Key: "topic", Kind: Str, Req: Required},
		{Go: "QueueID", Key: "queueId", Kind: I32, Req: Required},
		{Go: "Timestamp", Key: "timestamp", Kind: I64, Req: Required},
		{Go: "BoundaryType", Key: "boundaryType", Kind: Str, If: `h.BoundaryType != ""`},
	}},
	{Type: "GetEarliestMsgStoretimeResponseHeader", Fields: []Field{
		{Go: "Timestamp", Key: "timestamp", Kind: I64, Req: Required},
	}},
	{Type: "ViewMessageRequestHeader", Fields: []Field{
		{Go: "Offset", Key: "offset", Kind: I64, Req: Required},
	}},
	{Type: "QueryMessageRequestHeader", Fields: []Field{
		{Go: "Topic", Key: "topic", Kind: Str, Req: Required},
		{Go: "Key", Key: "key", Kind: Str, Req: Required},
		{Go: "MaxNum", Key: "maxNum", Kind: I32, Req: Required},
		{Go: "BeginTimestamp", Key: "beginTimestamp", Kind: I64, Req: Required},
		{Go: "EndTimestamp", Key: "endTimestamp", Kind: I64, Req: Required},
		{Go: "UniqueKeyQuery", Key: "_UNIQUE_KEY_QUERY", Kind: Bool},
	}},
	{Type: "QueryMessageResponseHeader", Fields: []Field{
		{Go: "IndexLastUpdateTimestamp", Key: "indexLastUpdateTimestamp", Kind: I64, Req: Required},
		{Go: "IndexLastUpdatePhyoffset", Key: "indexLastUpdatePhyoffset", Kind: I64, Req: Required},
	}},
	{Type: "ConsumerSendMsgBackRequestHeader", Fields: []Field{
		{Go: "Offset", Key: "offset", Kind: I64, Req: Required},
		{Go: "Group", Key: "group", Kind: Str, Req: Required},
		{Go: "DelayLevel", Key: "delayLevel", Kind: I32, Req: Required},
		{Go: "OriginMsgID", Key: "originMsgId", Kind: Str},
		{Go: "OriginTopic", Key: "originTopic", Kind: Str},
		{Go: "UnitMode", Key: "unitMode", Kind: Bool},
		{Go: "MaxReconsumeTimes", Key: "maxReconsumeTimes", Kind: I32, Has: "HasMaxReconsumeTimes"},
	}},
	{Type: "UnregisterClientRequestHeader", Fields: []Field{
		{Go: "ClientID", Key: "clientID", Kind: Str, Req: Required},
		{Go: "ProducerGroup", Key: "producerGroup", Kind: Str},
		{Go: "ConsumerGroup", Key: "consumerGroup", Kind: Str},
	}},
	{Type: "ConsumerGroupHeader", Fields: []Field{
		{Go: "ConsumerGroup", Key: "consumerGroup", Kind: Str, Req: Required},
	}},
	{Type: "CreateTopicRequestHeader", Fields: []Field{
		{Go: "Topic", Key: "topic", Kind: Str, Req: Required},
		{Go: "DefaultTopic", Key: "defaultTopic", Kind: Str, Req: Required},
		{Go: "ReadQueueNums", Key: "readQueueNums", Kind: I32, Req: Required},
		{Go: "WriteQueueNums", Key: "writeQueueNums", Kind: I32, Req: Required},
		{Go: "Perm", Key: "perm", Kind: I32, Req: Required},
		{Go: "TopicFilterType", Key: "topicFilterType", Kind: Str, Req: Required},
		{Go: "TopicSysFlag", Key: "topicSysFlag", Kind: I32},
		{Go: "Order", Key: "order", Kind: Bool, Req: Required},
	}},
	{Type: "DeleteTopicRequestHeader", Fields: []Field{
		{Go: "Topic", Key: "topic", Kind: Str, Req: Required},
	}},
	// headers_admin.go
	{Type: "ResetOffsetRequestHeader", Fields: []Field{
		{Go: "Topic", Key: "topic", Kind: Str, Req: Required},
		{Go: "Group", Key: "group", Kind: Str, Req: Required},
		{Go: "Timestamp", Key: "timestamp", Kind: I64, Req: Required},
		{Go: "IsForce", Key: "isForce", Kind: Bool, Req: Required},
		{Go: "QueueID", Key: "queueId", Kind: I32, Has: "HasQueueID"},
		{Go: "Offset", Key: "offset", Kind: I64, Has: "HasOffset"},
	}},
	{Type: "GetConsumerStatusRequestHeader", Fields: []Field{
		{Go: "Topic", Key: "topic", Kind: Str, Req: Required},
		{Go: "Group", Key: "group", Kind: Str, Req: Required},
		{Go: "ClientAddr", Key: "clientAddr", Kind: Str},
	}},
	{Type: "GetConsumerRunningInfoRequestHeader", Fields: []Field{
		{Go: "ConsumerGroup", Key: "consumerGroup", Kind: Str, Req: Required},
		{Go: "ClientID", Key: "clientId", Kind: Str, Req: Required},
		{Go: "JstackEnable", Key: "jstackEnable", Kind: Bool},
	}},
	{Type: "ConsumeMessageDirectlyRequestHeader", Fields: []Field{
		{Go: "ConsumerGroup", Key: "consumerGroup", Kind: Str, Req: Required},
		{Go: "ClientID", Key: "clientId", Kind: Str},
		{Go: "MsgID", Key: "msgId", Kind: Str},
		{Go: "BrokerName", Key: "brokerName", Kind: Str},
	}},
	{Type: "TopicGroupHeader", Fields: []Field{
		{Go: "Topic", Key: "topic", Kind: Str, Req: Required},
		{Go: "Group", Key: "group", Kind: Str, Req: Required},
	}},
	{Type: "CloneGroupOffsetRequestHeader", Fields: []Field{
		{Go: "SrcGroup", Key: "srcGroup", Kind: Str, Req: Required},
		{Go: "DestGroup", Key: "destGroup", Kind: Str, Req: Required},
		{Go: "Topic", Key: "topic", Kind: Str},
		{Go: "Offline", Key: "offline", Kind: Bool},
	}},
	{Type: "GetConsumeStatsInBrokerHeader", Fields: []Field{
		{Go: "IsOrder", Key: "isOrder", Kind: Bool, Req: Required},
	}},
	{Type: "ViewBrokerStatsDataRequestHeader", Fields: []Field{
		{Go: "StatsName", Key: "statsName", Kind: Str, Req: Required},
		{Go: "StatsKey", Key: "statsKey", Kind: Str, Req: Required},
	}},
	{Type: "QueryConsumeQueueRequestHeader", Fields: []Field{
		{Go: "Topic", Key: "topic", Kind: Str, Req: Required},
		{Go: "QueueID", Key: "queueId", Kind: I32, Req: Required},
		{Go: "Index", Key: "index", Kind: I64, Req: Required},
		{Go: "Count", Key: "count", Kind: I32, Req: Required},
		{Go: "ConsumerGroup", Key: "consumerGroup", Kind: Str},
	}},
	{Type: "DeleteSubscriptionGroupRequestHeader", Fields: []Field{
		{Go: "GroupName", Key: "groupName", Kind: Str, Req: Required},
		{Go: "RemoveOffset", Key: "removeOffset", Kind: Bool},
	}},
	{Type: "QueryByConsumerHeader", Fields: []Field{
		{Go: "Group", Key: "group", Kind: Str, Req: Required},
		{Go: "Topic", Key: "topic", Kind: Str},
	}},
	{Type: "GetBrokerConfigResponseHeader", Fields: []Field{
		{Go: "Version", Key: "version", Kind: Str, Always: true},
	}},
	// bodies_broker.go
	{Type: "GetConsumeStatsRequestHeader", Fields: []Field{
		{Go: "ConsumerGroup", Key: "consumerGroup", Kind: Str, Req: Required},
		{Go: "Topic", Key: "topic", Kind: Str},
	}},
	{Type: "TopicHeader", Fields: []Field{
		{Go: "Topic", Key: "topic", Kind: Str, Req: Required},
	}},
	{Type: "GroupHeader", Fields: []Field{
		{Go: "GroupName", Key: "groupName", Kind: Str, Req: Required},
	}},
}
