"""Security (issue 20): SASL mechanisms, credentials and, later, TLS listeners and ACL
authorization. Pure state machines here; the broker's trio shell drives them."""
