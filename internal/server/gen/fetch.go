package gen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"syscall"
	"time"
)

// Remote images: the defaults of RemoteImages' zero fields.
const (
	DefaultRemoteImageMaxBytes = 20 << 20
	DefaultRemoteImageTimeout  = 10 * time.Second
	// remoteImageRedirects is the most redirects one fetch follows.
	remoteImageRedirects = 3
)

// RemoteImages says whether and how image parts given by http(s) URL are
// fetched. A server that fetched any URL would be a proxy into its own
// network, so by default none is, and when some are, the address each
// connection actually dials is checked (after DNS and after every
// redirect), refusing loopback, private, link-local and other non-public
// addresses unless AllowPrivate.
type RemoteImages struct {
	Allow        bool
	MaxBytes     int64         // the most bytes one image may have (0: DefaultRemoteImageMaxBytes)
	Timeout      time.Duration // the whole fetch, redirects included (0: DefaultRemoteImageTimeout)
	AllowPrivate bool
}

// errPrivateAddress is what the dialer's check returns for a refused
// address; the fetch error names the rule rather than the address.
var errPrivateAddress = errors.New("the host resolves to a loopback, private, link-local or otherwise non-public address (--allow-private-image-hosts allows it)")

// fetcher fetches remote images under one RemoteImages.
type fetcher struct {
	opt    RemoteImages
	client *http.Client
}

func newFetcher(opt RemoteImages) *fetcher { return newFetcherCheck(opt, publicAddr) }

// newFetcherCheck is newFetcher with the test of a dialed address (the
// tests treat one loopback address as public).
func newFetcherCheck(opt RemoteImages, public func(netip.Addr) bool) *fetcher {
	if opt.MaxBytes <= 0 {
		opt.MaxBytes = DefaultRemoteImageMaxBytes
	}
	if opt.Timeout <= 0 {
		opt.Timeout = DefaultRemoteImageTimeout
	}
	d := &net.Dialer{Timeout: opt.Timeout}
	if !opt.AllowPrivate {
		d.Control = func(_, address string, _ syscall.RawConn) error { return checkDialed(address, public) }
	}
	tr := &http.Transport{
		// No proxy from the environment: the check must see the address
		// of the image's host, not of a proxy that would reach any host.
		Proxy:                 nil,
		DialContext:           d.DialContext,
		TLSHandshakeTimeout:   opt.Timeout,
		ResponseHeaderTimeout: opt.Timeout,
		MaxIdleConns:          4,
		IdleConnTimeout:       30 * time.Second,
	}
	return &fetcher{opt: opt, client: &http.Client{
		Transport:     tr,
		Timeout:       opt.Timeout,
		CheckRedirect: checkRedirect,
	}}
}

// checkRedirect follows at most remoteImageRedirects redirects, to http(s)
// only; the dialer checks the new host's address like the first one's.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > remoteImageRedirects {
		return fmt.Errorf("more than %d redirects", remoteImageRedirects)
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return fmt.Errorf("a redirect to a %q URL", req.URL.Scheme)
	}
	return nil
}

// checkDialed is the dialer's Control: it sees the resolved address of
// every connection, so a host name that resolves (or re-resolves: DNS
// rebinding) to an internal address, or a redirect to one, is refused as
// the literal address would be.
func checkDialed(address string, public func(netip.Addr) bool) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("unexpected dial address %q", address)
	}
	if !public(ap.Addr()) {
		return errPrivateAddress
	}
	return nil
}

// nonPublic are the ranges besides those netip classifies that no public
// image host has: "this network", shared address space (carrier NAT), the
// IETF protocol block, the benchmarking and documentation ranges,
// reserved and broadcast, and IPv6's NAT64, 6to4, Teredo and discard
// prefixes (which can embed an internal IPv4 address).
var nonPublic = func() []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range []string{"0.0.0.0/8", "100.64.0.0/10", "192.0.0.0/24", "192.0.2.0/24", "198.18.0.0/15",
		"198.51.100.0/24", "203.0.113.0/24", "240.0.0.0/4", "64:ff9b::/96", "64:ff9b:1::/48", "2002::/16",
		"2001::/32", "2001:db8::/32", "100::/64"} {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	return ps
}()

// publicAddr reports whether ip is an ordinary public unicast address.
func publicAddr(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsGlobalUnicast() || ip.IsPrivate() || ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsUnspecified() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// fetch gets the image at u (http or https): at most MaxBytes, within
// Timeout. Errors are short and name the URL's host, not internals.
func (f *fetcher) fetch(ctx context.Context, u *url.URL) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, f.opt.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("invalid URL: %v", err)
	}
	req.Header.Set("Accept", "image/*")
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, fetchProblem(err, f.opt.Timeout)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the image host answered %s", resp.Status)
	}
	if resp.ContentLength > f.opt.MaxBytes {
		return nil, f.tooLarge()
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, f.opt.MaxBytes+1))
	if err != nil {
		return nil, fetchProblem(err, f.opt.Timeout)
	}
	if int64(len(data)) > f.opt.MaxBytes {
		return nil, f.tooLarge()
	}
	return data, nil
}

func (f *fetcher) tooLarge() error {
	return fmt.Errorf("the image is larger than %s bytes (--remote-image-max-mb)", strconv.FormatInt(f.opt.MaxBytes, 10))
}

// fetchProblem says why a fetch failed in a line: the refused address, the
// timeout, or the transport's own reason without the URL it repeats.
func fetchProblem(err error, timeout time.Duration) error {
	if errors.Is(err, errPrivateAddress) {
		return errPrivateAddress
	}
	if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		return fmt.Errorf("the fetch took longer than %s (--remote-image-timeout)", timeout)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("the fetch failed: %v", err)
}

func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}
