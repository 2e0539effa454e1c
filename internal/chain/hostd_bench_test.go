package chain_test

import "testing"

// BenchmarkProxyHost measures 1 KiB session/updates from an agent through
// the proxy (no plugs besides the switch) when the agent runs on the
// runner's machine and when it runs on a hostd reached through a
// command's stdio (hosts.command), its stdio carried by the hostd stream.
func BenchmarkProxyHost(b *testing.B) {
	for _, host := range []string{"local", "hostd"} {
		var outer []string
		if host == "hostd" {
			outer = append(outer, switchPlug(`hosts.command(`+hostdArgv(b.TempDir())+`)`))
		}
		b.Run("throughput/"+host, func(b *testing.B) { benchFlood(b, throughProxy(b, "flood", 0, outer...)) })
	}
}
