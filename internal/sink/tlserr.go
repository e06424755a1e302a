package sink

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strings"
)

// CertUntrusted says whether err is a failed verification of a server's
// TLS certificate (an unknown CA, another host's or an expired
// certificate), which destinations answer by pointing at tls_ca.
func CertUntrusted(err error) bool {
	var verify *tls.CertificateVerificationError
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	return errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &host) || errors.As(err, &invalid)
}

// ClientCertRefused says whether err is a server's TLS alert about the
// client's certificate: none given where one is required, or one it does
// not accept. Go reports the alert only as text.
func ClientCertRefused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error" &&
		(strings.Contains(op.Err.Error(), "certificate required") || strings.Contains(op.Err.Error(), "bad certificate"))
}
