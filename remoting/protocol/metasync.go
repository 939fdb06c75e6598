package protocol

// NotifyMetadataChanged is SmartGo's own request code, master to slave, in
// its private range beside ForwardReplyMessage (9130). A master sends it,
// one way and without body, to each connected slave that gave its
// remoting address in the HA handshake (store/ha/wire.go): without header
// whenever its topic or subscription group table changed, and with the
// ext field scope=offsets (at most every 250 ms) whenever its consumer or
// delay offsets changed. The slave then copies the master's metadata (or,
// for scope=offsets, only its offsets) at once instead of at its next
// broker.slave_sync_interval, so a change made just before a failover
// survives the promotion. The master sends to the port the hello names on
// the IP of the HA connection. A slave answers Success (when asked with a
// response) to a notice from its master's host and NoPermission to one
// from any other; any other broker ignores it. The notice names nothing to
// copy from: the slave copies from the master it follows (broker/metasync.go).
const NotifyMetadataChanged RequestCode = 9140
