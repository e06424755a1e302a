package sink

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
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
