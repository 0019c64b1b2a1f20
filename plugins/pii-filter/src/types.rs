//! The PII types the filter knows, their config names and placeholders. Secrets are reported as
//! sub-types so a platform team can treat, say, a leaked private key differently from a JWT, while
//! the `SECRET` group lets one config line cover them all.

/// One kind of sensitive value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PiiType {
    Email,
    Phone,
    CreditCard,
    UsSsn,
    Iban,
    IpAddress,
    AwsKey,
    GithubToken,
    SlackToken,
    Jwt,
    PrivateKey,
    UrlCredentials,
    ApiKey,
    Credential,
    /// A person's name: found by an `entities` guard model only (`entities.rs`).
    Person,
    /// A street address or place: found by an `entities` guard model only.
    Location,
    /// A date of birth: a date an `entities` guard model found, said to be one by its words.
    DateOfBirth,
}

/// Config name of the group that holds every secret sub-type.
pub const SECRET_GROUP: &str = "SECRET";

impl PiiType {
    /// Every type, in reporting order.
    pub const ALL: [PiiType; 17] = [
        PiiType::Email,
        PiiType::Phone,
        PiiType::CreditCard,
        PiiType::UsSsn,
        PiiType::Iban,
        PiiType::IpAddress,
        PiiType::AwsKey,
        PiiType::GithubToken,
        PiiType::SlackToken,
        PiiType::Jwt,
        PiiType::PrivateKey,
        PiiType::UrlCredentials,
        PiiType::ApiKey,
        PiiType::Credential,
        PiiType::Person,
        PiiType::Location,
        PiiType::DateOfBirth,
    ];

    /// The types the filter's own detectors find (the others need an `entities` model).
    pub fn by_pattern(self) -> bool {
        !matches!(
            self,
            PiiType::Person | PiiType::Location | PiiType::DateOfBirth
        )
    }

    /// Number of types (array sizes).
    pub const COUNT: usize = Self::ALL.len();

    /// Position in [`PiiType::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The name used in config, reasons and placeholders.
    pub fn name(self) -> &'static str {
        match self {
            PiiType::Email => "EMAIL",
            PiiType::Phone => "PHONE",
            PiiType::CreditCard => "CREDIT_CARD",
            PiiType::UsSsn => "US_SSN",
            PiiType::Iban => "IBAN",
            PiiType::IpAddress => "IP_ADDRESS",
            PiiType::AwsKey => "AWS_KEY",
            PiiType::GithubToken => "GITHUB_TOKEN",
            PiiType::SlackToken => "SLACK_TOKEN",
            PiiType::Jwt => "JWT",
            PiiType::PrivateKey => "PRIVATE_KEY",
            PiiType::UrlCredentials => "URL_CREDENTIALS",
            PiiType::ApiKey => "API_KEY",
            PiiType::Credential => "CREDENTIAL",
            PiiType::Person => "PERSON",
            PiiType::Location => "LOCATION",
            PiiType::DateOfBirth => "DATE_OF_BIRTH",
        }
    }

    /// What a redacted value is replaced with.
    pub fn placeholder(self) -> &'static str {
        match self {
            PiiType::Email => "[EMAIL]",
            PiiType::Phone => "[PHONE]",
            PiiType::CreditCard => "[CREDIT_CARD]",
            PiiType::UsSsn => "[US_SSN]",
            PiiType::Iban => "[IBAN]",
            PiiType::IpAddress => "[IP_ADDRESS]",
            PiiType::AwsKey => "[AWS_KEY]",
            PiiType::GithubToken => "[GITHUB_TOKEN]",
            PiiType::SlackToken => "[SLACK_TOKEN]",
            PiiType::Jwt => "[JWT]",
            PiiType::PrivateKey => "[PRIVATE_KEY]",
            PiiType::UrlCredentials => "[URL_CREDENTIALS]",
            PiiType::ApiKey => "[API_KEY]",
            PiiType::Credential => "[CREDENTIAL]",
            PiiType::Person => "[PERSON]",
            PiiType::Location => "[LOCATION]",
            PiiType::DateOfBirth => "[DATE_OF_BIRTH]",
        }
    }

    /// The group a type belongs to, if any.
    pub fn group(self) -> Option<&'static str> {
        match self {
            PiiType::AwsKey
            | PiiType::GithubToken
            | PiiType::SlackToken
            | PiiType::Jwt
            | PiiType::PrivateKey
            | PiiType::UrlCredentials
            | PiiType::ApiKey
            | PiiType::Credential => Some(SECRET_GROUP),
            _ => None,
        }
    }

    /// The type with this config name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The indefinite article for the type's name in prose ("an EMAIL", "a US_SSN").
    pub fn article(self) -> &'static str {
        match self {
            PiiType::Email
            | PiiType::Iban
            | PiiType::IpAddress
            | PiiType::AwsKey
            | PiiType::ApiKey => "an",
            _ => "a",
        }
    }
}
