//! Country and city of an address, from a database in the MaxMind DB format (GeoLite2-City or
//! -Country, DB-IP's lite databases), memory-mapped. [`GeoIp::reload`] swaps in a new file
//! without a restart (the databases are updated monthly).

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};

use maxminddb::{Mmap, Reader, geoip2};

/// Where an address is, as far as the database knows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Place {
    /// ISO 3166-1 alpha-2.
    pub country: Option<String>,
    /// The English name.
    pub city: Option<String>,
}

/// A GeoIP database that cannot be opened.
#[derive(Debug, thiserror::Error)]
#[error("cannot open the GeoIP database {path}: {reason}")]
pub struct GeoIpError {
    path: PathBuf,
    reason: String,
}

/// A GeoIP database, reloadable in place.
pub struct GeoIp {
    path: PathBuf,
    reader: RwLock<Arc<Reader<Mmap>>>,
}

impl std::fmt::Debug for GeoIp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GeoIp").field("path", &self.path).finish()
    }
}

/// Opens `path` and checks that its type has countries, for [`GeoIp::open`] and
/// [`GeoIp::reload`] alike: a database of another kind (ASN, ISP, …) opens, but no address would
/// ever get a country from it, and country targeting and analytics would never match.
fn open(path: &Path) -> Result<Reader<Mmap>, GeoIpError> {
    // Safety of the mapping is the crate's concern; a file replaced under the server is swapped
    // in by `reload` (write the new file beside it and rename it over the old one).
    let reader = Reader::open_mmap(path).map_err(|e| GeoIpError {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
    let kind = &reader.metadata.database_type;
    if !has_countries(kind) {
        return Err(GeoIpError {
            path: path.to_owned(),
            reason: format!(
                "it is a {kind:?} database, which has no countries; give a City or Country \
                 database (GeoLite2-City, GeoLite2-Country, DB-IP's City or Country Lite)"
            ),
        });
    }
    Ok(reader)
}

/// Whether a database of this type (its metadata's `database_type`) may have countries: every
/// type but the kinds known to have none (MaxMind's and DB-IP's ASN, ISP, connection type,
/// domain and anonymous IP databases). A type this list does not know is taken, as any MaxMind
/// DB file was before: another vendor's City database must not be refused for its name.
fn has_countries(database_type: &str) -> bool {
    let kind = database_type.to_ascii_lowercase();
    !["asn", "isp", "connection-type", "domain", "anonymous"]
        .iter()
        .any(|word| kind.contains(word))
}

impl GeoIp {
    /// Opens the database at `path`.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, GeoIpError> {
        let path = path.into();
        let reader = open(&path)?;
        Ok(Self {
            reader: RwLock::new(Arc::new(reader)),
            path,
        })
    }

    /// Opens the file again and answers from it from now on; on failure the old one stays.
    pub fn reload(&self) -> Result<(), GeoIpError> {
        let reader = Arc::new(open(&self.path)?);
        *self.reader.write().unwrap_or_else(PoisonError::into_inner) = reader;
        Ok(())
    }

    /// The file it reads.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where `addr` is; empty when the database has no answer.
    pub fn locate(&self, addr: IpAddr) -> Place {
        let reader = self
            .reader
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        // A City record answers a Country database's lookups too (it has no `city`).
        match reader.lookup::<geoip2::City>(addr) {
            Ok(Some(city)) => Place {
                country: city
                    .country
                    .and_then(|c| c.iso_code)
                    .map(str::to_owned)
                    .filter(|code| code.len() == 2),
                city: city
                    .city
                    .and_then(|c| c.names)
                    .and_then(|names| names.get("en").map(|name| (*name).to_owned())),
            },
            _ => Place::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn test_db(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/geoip")
            .join(name)
    }

    fn place(country: &str, city: Option<&str>) -> Place {
        Place {
            country: Some(country.into()),
            city: city.map(Into::into),
        }
    }

    #[test]
    fn the_test_city_database_gives_its_known_answers() {
        let geo = GeoIp::open(test_db("GeoLite2-City-Test.mmdb")).expect("the test database opens");
        let ip = |s: &str| s.parse::<IpAddr>().expect("an address");
        assert_eq!(geo.locate(ip("81.2.69.142")), place("GB", Some("London")));
        assert_eq!(
            geo.locate(ip("2.125.160.216")),
            place("GB", Some("Boxford"))
        );
        assert_eq!(
            geo.locate(ip("89.160.20.112")),
            place("SE", Some("Linköping"))
        );
        assert_eq!(geo.locate(ip("216.160.83.56")), place("US", Some("Milton")));
        assert_eq!(geo.locate(ip("2001:218::1")), place("JP", None));
        assert_eq!(geo.locate(ip("127.0.0.1")), Place::default());
        assert_eq!(geo.locate(ip("10.0.0.1")), Place::default());
        geo.reload().expect("the same file opens again");
        assert_eq!(geo.locate(ip("81.2.69.142")), place("GB", Some("London")));
    }

    #[test]
    fn a_country_database_answers_the_country_alone() {
        let geo =
            GeoIp::open(test_db("GeoLite2-Country-Test.mmdb")).expect("the test database opens");
        let place = geo.locate("81.2.69.142".parse().expect("an address"));
        assert_eq!(place.country.as_deref(), Some("GB"));
        assert_eq!(place.city, None);
    }

    #[test]
    fn a_database_without_countries_is_refused_naming_its_type() {
        let e = GeoIp::open(test_db("GeoLite2-ASN-Test.mmdb")).expect_err("no countries");
        let said = e.to_string();
        assert!(said.contains("GeoLite2-ASN-Test.mmdb"), "{said}");
        assert!(said.contains("\"GeoLite2-ASN\" database"), "{said}");

        // A reload makes the same check, and keeps the database it had.
        let dir = std::env::temp_dir().join(format!("geoip-reload-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a directory");
        let path = dir.join("geo.mmdb");
        std::fs::copy(test_db("GeoLite2-City-Test.mmdb"), &path).expect("a copy");
        let geo = GeoIp::open(&path).expect("the city database opens");
        std::fs::copy(test_db("GeoLite2-ASN-Test.mmdb"), dir.join("asn.mmdb")).expect("a copy");
        std::fs::rename(dir.join("asn.mmdb"), &path).expect("replaced");
        let e = geo.reload().expect_err("no countries");
        assert!(e.to_string().contains("GeoLite2-ASN"), "{e}");
        let place = geo.locate("81.2.69.142".parse().expect("an address"));
        std::fs::remove_dir_all(&dir).expect("removed");
        assert_eq!(place.country.as_deref(), Some("GB"));
    }

    #[test]
    fn the_types_with_countries_are_told_apart() {
        for kind in [
            "GeoLite2-City",
            "GeoLite2-Country",
            "GeoIP2-City",
            "GeoIP2-Country",
            "GeoIP2-Enterprise",
            "GeoIP2-City-Africa",
            "DBIP-City-Lite",
            "DBIP-Country-Lite",
            "DBIP-Location (compat=City)",
            "DBIP-Country (compat=Country)",
            "IP2LOCATION-LITE-DB11",
        ] {
            assert!(has_countries(kind), "{kind}");
        }
        for kind in [
            "GeoLite2-ASN",
            "GeoIP2-ISP",
            "GeoIP2-Connection-Type",
            "GeoIP2-Domain",
            "GeoIP2-Anonymous-IP",
            "DBIP-ASN-Lite",
            "DBIP-ASN-Lite (compat=GeoLite2-ASN)",
        ] {
            assert!(!has_countries(kind), "{kind}");
        }
    }

    #[test]
    fn a_missing_file_is_an_error_naming_it() {
        let e = GeoIp::open("/nonexistent/geo.mmdb").expect_err("no such file");
        assert!(e.to_string().contains("/nonexistent/geo.mmdb"), "{e}");
    }
}
