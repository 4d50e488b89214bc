//! vmad's one integration-test binary: everything here goes through the public API.

mod pcap;
