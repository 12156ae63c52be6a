// Package fabric carries RoCEv2 packets between emulated ConnectX ports. Two roce.Link
// implementations live here:
//
//   - Fabric, an in-process network that moves *roce.Packet values between endpoints
//     addressed by IP, with per-endpoint, per-direction fault hooks (link down, blackhole, drop
//     the next N packets or ACKs, random loss, fixed or random delay, reordering, a filter)
//     that are deterministic under a seed. It is what the RC transport and the failover logic
//     are tested on: a lost ACK after the data landed, a link that goes down mid-WRITE.
//   - UDPLink, real RoCEv2 over a UDP socket on port 4791, so emulated hosts in different
//     processes or network namespaces exchange wire-format packets (with ICRC) and fail for
//     real when a veth goes down.
//
// The package sits below the NIC model: it knows packets and ports, never QPs.
package fabric
