package protocol

import "strconv"

// RequestCode identifies the operation a request asks for. The values are
// RocketMQ 4.9.8's RequestCode table and are frozen: they are on the wire.
type RequestCode = int32

// Request codes (RocketMQ 4.9.8 RequestCode). Frozen wire values.
const (
	SendMessage                      RequestCode = 10
	PullMessage                      RequestCode = 11
	QueryMessage                     RequestCode = 12
	QueryBrokerOffset                RequestCode = 13
	QueryConsumerOffset              RequestCode = 14
	UpdateConsumerOffset             RequestCode = 15
	UpdateAndCreateTopic             RequestCode = 17
	GetAllTopicConfig                RequestCode = 21
	GetTopicConfigList               RequestCode = 22
	GetTopicNameList                 RequestCode = 23
	UpdateBrokerConfig               RequestCode = 25
	GetBrokerConfig                  RequestCode = 26
	TriggerDeleteFiles               RequestCode = 27
	GetBrokerRuntimeInfo             RequestCode = 28
	SearchOffsetByTimestamp          RequestCode = 29
	GetMaxOffset                     RequestCode = 30
	GetMinOffset                     RequestCode = 31
	GetEarliestMsgStoretime          RequestCode = 32
	ViewMessageByID                  RequestCode = 33
	HeartBeat                        RequestCode = 34
	UnregisterClient                 RequestCode = 35
	ConsumerSendMsgBack              RequestCode = 36
	EndTransaction                   RequestCode = 37
	GetConsumerListByGroup           RequestCode = 38
	CheckTransactionState            RequestCode = 39
	NotifyConsumerIDsChanged         RequestCode = 40
	LockBatchMQ                      RequestCode = 41
	UnlockBatchMQ                    RequestCode = 42
	GetAllConsumerOffset             RequestCode = 43
	GetAllDelayOffset                RequestCode = 45
	CheckClientConfig                RequestCode = 46
	UpdateAndCreateACLConfig         RequestCode = 50
	DeleteACLConfig                  RequestCode = 51
	GetBrokerClusterACLInfo          RequestCode = 52
	UpdateGlobalWhiteAddrsConfig     RequestCode = 53
	GetBrokerClusterACLConfig        RequestCode = 54
	PutKVConfig                      RequestCode = 100
	GetKVConfig                      RequestCode = 101
	DeleteKVConfig                   RequestCode = 102
	RegisterBroker                   RequestCode = 103
	UnregisterBroker                 RequestCode = 104
	GetRouteInfoByTopic              RequestCode = 105
	GetBrokerClusterInfo             RequestCode = 106
	UpdateAndCreateSubscriptionGroup RequestCode = 200
	GetAllSubscriptionGroupConfig    RequestCode = 201
	GetTopicStatsInfo                RequestCode = 202
	GetConsumerConnectionList        RequestCode = 203
	GetProducerConnectionList        RequestCode = 204
	WipeWritePermOfBroker            RequestCode = 205
	GetAllTopicListFromNameserver    RequestCode = 206
	DeleteSubscriptionGroup          RequestCode = 207
	GetConsumeStats                  RequestCode = 208
	SuspendConsumer                  RequestCode = 209
	ResumeConsumer                   RequestCode = 210
	ResetConsumerOffsetInConsumer    RequestCode = 211
	ResetConsumerOffsetInBroker      RequestCode = 212
	AdjustConsumerThreadPool         RequestCode = 213
	WhoConsumeTheMessage             RequestCode = 214
	DeleteTopicInBroker              RequestCode = 215
	DeleteTopicInNamesrv             RequestCode = 216
	GetKVListByNamespace             RequestCode = 219
	ResetConsumerClientOffset        RequestCode = 220
	GetConsumerStatusFromClient      RequestCode = 221
	InvokeBrokerToResetOffset        RequestCode = 222
	InvokeBrokerToGetConsumerStatus  RequestCode = 223
	GetTopicsByCluster               RequestCode = 224
	QueryTopicConsumeByWho           RequestCode = 300
	RegisterFilterServer             RequestCode = 301
	RegisterMessageFilterClass       RequestCode = 302
	QueryConsumeTimeSpan             RequestCode = 303
	GetSystemTopicListFromNS         RequestCode = 304
	GetSystemTopicListFromBroker     RequestCode = 305
	CleanExpiredConsumeQueue         RequestCode = 306
	GetConsumerRunningInfo           RequestCode = 307
	QueryCorrectionOffset            RequestCode = 308
	ConsumeMessageDirectly           RequestCode = 309
	SendMessageV2                    RequestCode = 310
	GetUnitTopicList                 RequestCode = 311
	GetHasUnitSubTopicList           RequestCode = 312
	GetHasUnitSubUnunitTopicList     RequestCode = 313
	CloneGroupOffset                 RequestCode = 314
	ViewBrokerStatsData              RequestCode = 315
	CleanUnusedTopic                 RequestCode = 316
	GetBrokerConsumeStats            RequestCode = 317
	UpdateNamesrvConfig              RequestCode = 318
	GetNamesrvConfig                 RequestCode = 319
	SendBatchMessage                 RequestCode = 320
	QueryConsumeQueue                RequestCode = 321
	QueryDataVersion                 RequestCode = 322
	ResumeCheckHalfMessage           RequestCode = 323
	SendReplyMessage                 RequestCode = 324
	SendReplyMessageV2               RequestCode = 325
	PushReplyMessageToClient         RequestCode = 326
	AddWritePermOfBroker             RequestCode = 327
	GetAllProducerInfo               RequestCode = 328
	DeleteExpiredCommitlog           RequestCode = 329
	// RocketMQ 5 codes newer admin tools send; SmartGo serves them too.
	QueryTopicsByConsumer       RequestCode = 343
	QuerySubscriptionByConsumer RequestCode = 345
	// SmartGo's own codes (no RocketMQ counterpart).
	StartShareGroup RequestCode = 900 // bodies in sharestart.go
)

// ResponseCode is the result code of a response (RemotingSysResponseCode
// plus ResponseCode in RocketMQ 4.9.8). Frozen wire values.
type ResponseCode = int32

// Response codes. Frozen wire values.
const (
	Success                            ResponseCode = 0
	SystemError                        ResponseCode = 1
	SystemBusy                         ResponseCode = 2
	RequestCodeNotSupported            ResponseCode = 3
	TransactionFailed                  ResponseCode = 4
	FlushDiskTimeout                   ResponseCode = 10
	SlaveNotAvailable                  ResponseCode = 11
	FlushSlaveTimeout                  ResponseCode = 12
	MessageIllegal                     ResponseCode = 13
	ServiceNotAvailable                ResponseCode = 14
	VersionNotSupported                ResponseCode = 15
	NoPermission                       ResponseCode = 16
	TopicNotExist                      ResponseCode = 17
	TopicExistAlready                  ResponseCode = 18
	PullNotFound                       ResponseCode = 19
	PullRetryImmediately               ResponseCode = 20
	PullOffsetMoved                    ResponseCode = 21
	QueryNotFound                      ResponseCode = 22
	SubscriptionParseFailed            ResponseCode = 23
	SubscriptionNotExist               ResponseCode = 24
	SubscriptionNotLatest              ResponseCode = 25
	SubscriptionGroupNotExist          ResponseCode = 26
	FilterDataNotExist                 ResponseCode = 27
	FilterDataNotLatest                ResponseCode = 28
	TransactionShouldCommit            ResponseCode = 200
	TransactionShouldRollback          ResponseCode = 201
	TransactionStateUnknow             ResponseCode = 202
	TransactionStateGroupWrong         ResponseCode = 203
	NoBuyerID                          ResponseCode = 204
	NotInCurrentUnit                   ResponseCode = 205
	ConsumerNotOnline                  ResponseCode = 206
	ConsumeMsgTimeout                  ResponseCode = 207
	NoMessage                          ResponseCode = 208
	UpdateAndCreateACLConfigFailed     ResponseCode = 209
	DeleteACLConfigFailed              ResponseCode = 210
	UpdateGlobalWhiteAddrsConfigFailed ResponseCode = 211
	FlowControl                        ResponseCode = 215
)

// Remarks the Java server uses for the generic failures; clients match on
// the bracketed prefix.
const (
	RemarkSystemBusy   = "[REJECTREQUEST]system busy, start flow control for a while"
	RemarkOverload     = "[OVERLOAD]system busy, start flow control for a while"
	RemarkPCBusy       = "[PCBUSY_CLEAN_QUEUE]broker busy, start flow control for a while"
	RemarkTimeoutQueue = "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while"
)

// NotSupportedRemark is the remark of a REQUEST_CODE_NOT_SUPPORTED response,
// " request type <code> not supported" (leading space as in Java).
func NotSupportedRemark(code int32) string {
	return " request type " + strconv.Itoa(int(code)) + " not supported"
}

// LanguageCode is the sender's implementation language. The numeric value
// is the byte of the ROCKETMQ binary header; JSON carries the name.
type LanguageCode uint8

// Language codes in Java's enum order. Frozen wire values.
const (
	LanguageJava LanguageCode = iota
	LanguageCPP
	LanguageDotNet
	LanguagePython
	LanguageDelphi
	LanguageErlang
	LanguageRuby
	LanguageOther
	LanguageHTTP
	LanguageGo
	LanguagePHP
	LanguageOMS
	LanguageRust
)

var languageNames = [...]string{"JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP", "OMS", "RUST"}

// String returns the Java enum name ("JAVA", "GO", ...); unknown values
// print as "OTHER".
func (l LanguageCode) String() string {
	if int(l) < len(languageNames) {
		return languageNames[l]
	}
	return "OTHER"
}

// ParseLanguage maps a Java enum name to its code; ok is false for an
// unknown name (callers usually fall back to LanguageOther).
func ParseLanguage(s string) (LanguageCode, bool) {
	for i, n := range languageNames {
		if n == s {
			return LanguageCode(i), true
		}
	}
	return LanguageOther, false
}

// Version ordinals of MQVersion.Version that change behaviour somewhere.
const (
	VersionV3_0_6  int32 = 21 // QUERY_NOT_FOUND remark mentions it
	VersionV3_0_11 int32 = 37 // namesrv expects RegisterBrokerBody
	VersionV3_4_9  int32 = 121
	VersionV4_5_2  int32 = 317 // rocketmq-client-go v2.1.2
	VersionV4_9_4  int32 = 401 // standard route JSON
	VersionV4_9_8  int32 = 409 // Java client 4.9.8
	VersionV5_0_0  int32 = 413

	// CurrentVersion is the version SmartGo puts in the commands it creates.
	CurrentVersion = VersionV4_9_8
)

// SerializeType is the header encoding, carried in the high byte of the
// header-length word.
type SerializeType uint8

// Serialize types. Frozen wire values.
const (
	SerializeJSON     SerializeType = 0
	SerializeRocketMQ SerializeType = 1
)

// String returns "JSON" or "ROCKETMQ".
func (t SerializeType) String() string {
	switch t {
	case SerializeJSON:
		return "JSON"
	case SerializeRocketMQ:
		return "ROCKETMQ"
	}
	return "SerializeType(" + strconv.Itoa(int(t)) + ")"
}

// Flag bits of a command.
const (
	FlagResponse int32 = 1 << 0
	FlagOneway   int32 = 1 << 1
)

// Permission bits of a topic or broker (PermName).
const (
	PermPriority int32 = 8
	PermRead     int32 = 4
	PermWrite    int32 = 2
	PermInherit  int32 = 1
)

// Well-known names.
const (
	// NamespaceOrderTopicConfig is the KV namespace holding
	// "brokerA:4;brokerB:4" order configurations per topic.
	NamespaceOrderTopicConfig = "ORDER_TOPIC_CONFIG"
	// DefaultTopic is the auto-create template topic.
	DefaultTopic = "TBW102"
	// MasterID is the broker id of a master.
	MasterID int64 = 0
)
