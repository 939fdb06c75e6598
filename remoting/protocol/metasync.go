package protocol

// NotifyMetadataChanged is SmartGo's own request code, master to slave, in
// its private range beside ForwardReplyMessage (9130). A master sends it,
// one way, to each connected slave that gave its remoting address in the
// HA handshake (store/ha/wire.go): without header or body whenever its
// topic or subscription group table changed, and with the ext field
// scope=offsets (at most every 250 ms) whenever its consumer or delay
// offsets changed. The slave then copies the master's metadata at once
// instead of at its next broker.slave_sync_interval (for scope=offsets it
// applies the changed offsets the notice carries, below, or copies only
// the offsets), so a change made just before a failover survives the
// promotion. The master sends to the port the hello names on
// the IP of the HA connection. A slave answers Success (when asked with a
// response) to a notice from its master's host and NoPermission to one
// from any other; any other broker ignores it. The notice names nothing to
// copy from: the slave copies from the master it follows (broker/metasync.go).
const NotifyMetadataChanged RequestCode = 9140

// An offset notice (scope=offsets) carries, besides, what changed since
// the master's previous offset notice, so the slave need not copy the
// whole tables (broker/offsetdelta.go): the ext fields offsetRun (decimal
// uint64 naming the master's process: its change counts restart with
// it), offsetFrom and offsetTo (the master's consumer-offset changes
// (offsetFrom, offsetTo] the body holds) and delaySeq (the change count
// of the delay offsets the body holds), and a JSON body OffsetDelta:
//
//	{"offsetTable":{"T@g":{"0":5}},"delayOffsetTable":{"1":12}}
//
// offsetTable holds the latest offset of each (topic@group, queue)
// changed in that range; delayOffsetTable is the whole delay offset
// table. A slave that holds the run's changes up to S applies the body
// when offsetFrom <= S (and the delay table when delaySeq is above the
// one it holds), and otherwise copies all the offsets. A notice without
// these fields asks for that full copy, as before. The answers to
// GET_ALL_CONSUMER_OFFSET and GET_ALL_DELAY_OFFSET name offsetRun, and
// offsetSeq or delaySeq, the change count of the table in their body.
const (
	FieldOffsetRun  = "offsetRun"
	FieldOffsetFrom = "offsetFrom"
	FieldOffsetTo   = "offsetTo"
	FieldOffsetSeq  = "offsetSeq"
	FieldDelaySeq   = "delaySeq"
)

// OffsetDelta is the body of an offset notice with offsetRun.
type OffsetDelta struct {
	OffsetTable      map[string]map[int32]int64 `json:"offsetTable,omitempty"`
	DelayOffsetTable map[int32]int64            `json:"delayOffsetTable,omitempty"`
}
