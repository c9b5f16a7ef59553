"""The table of real secret forms that no output of any command may contain, and of look-alikes that must stay.

Each secret is planted where users really put it: an environment variable, an argument of the command line,
a value of the app config the program publishes on its board, or a name the program chooses (a thread, the
function it runs, a directory its code file is in, a queue the probes watch) or an exception message it prints
when a thread dies (on stderr, a file). A name may reuse a secret of the environment or argv (``env``/``argv``
hold it then). ``needle`` is the part that must never appear (the password itself, not the variable name);
``keep`` what was planted with it and must stay. The values are fake, in the real formats.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Secret:
    id: str
    needle: str
    env: dict[str, str] = field(default_factory=dict)
    argv: tuple[str, ...] = ()
    config: dict[str, Any] = field(default_factory=dict)
    thread: str = ""  # a thread of the program named so (with ``exception``: the thread that dies)
    function: str = ""  # a function a thread runs, named so
    directory: str = ""  # a directory in the path of the file that function is in
    queue: str = ""  # a queue the probes watch, named so
    exception: str = ""  # the message of an uncaught exception raised in a thread (its traceback on stderr)
    keep: tuple[str, ...] = ()  # planted beside the secret (argv): must survive

    @property
    def names(self) -> tuple[str, ...]:
        """The names and texts the program itself chooses for this form."""
        return tuple(n for n in (self.thread, self.function, self.directory, self.queue, self.exception) if n)


_JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
        "jwtSignaturePartXyz0123456789abcdefABCDEF")
_PEM_ENV = ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQpemEnvBody\n"
            "-----END OPENSSH PRIVATE KEY-----")
_PEM_ARG = ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAargvPemSecretBody0123\n"
            "-----END RSA PRIVATE KEY-----")
_S3 = ("https://bucket.s3.amazonaws.com/obj.bin?X-Amz-Algorithm=AWS4-HMAC-SHA256"
       "&X-Amz-Credential=s3CredentialPart0123%2F20240101%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20240101T000000Z"
       "&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Signature=s3PresignedSignature0123456789abcdef")
_GCS = ("https://storage.googleapis.com/bucket/obj?X-Goog-Algorithm=GOOG4-RSA-SHA256"
        "&X-Goog-Credential=svc%40proj.iam.gserviceaccount.com%2F20240101&X-Goog-Date=20240101T000000Z"
        "&X-Goog-Expires=900&X-Goog-SignedHeaders=host&X-Goog-Signature=gcsSignedSignature0123456789abcdef")
_SAS = ("https://acct.blob.core.windows.net/container/blob.bin?sv=2022-11-02&ss=b&srt=o&sp=r"
        "&se=2030-01-01T00:00:00Z&spr=https&sig=azureSasSignature0123456789%3D")
_PEM_POSITIONAL = ("-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIpositionalPemKeyBody0123456789\n"
                   "-----END EC PRIVATE KEY-----")
_PEM_EXCEPTION = ("bad signing key:\n-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANstderrPemBody0123abcdef\n"
                  "-----END PRIVATE KEY-----")
_GOOGLE_CREDENTIALS = ('{"type": "service_account", "private_key_id": "0123abcd", "private_key": '
                       '"-----BEGIN PRIVATE KEY-----\\nMIIEvgIBADANgcpCredentialsPemBody0123\\n-----END PRIVATE KEY-----\\n"}')
_AZURE_CONN = ("DefaultEndpointsProtocol=https;AccountName=acct;"
               "AccountKey=azureAccountKey0123456789+/abcDEF==;EndpointSuffix=core.windows.net")

SECRETS: tuple[Secret, ...] = (
    # --- the environment (the leaks of the issue first) ---
    Secret("env DB_PASS", "Tr0ub4dor-db-pass", env={"DB_PASS": "Tr0ub4dor-db-pass"}),
    Secret("env GITHUB_PAT", "github_pat_11ABCDEFG0abcdefghijkl_mnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRS",
           env={"GITHUB_PAT": "github_pat_11ABCDEFG0abcdefghijkl_mnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRS"}),
    Secret("env AUTH_HEADER", "authHeaderSecret123456", env={"AUTH_HEADER": "Bearer authHeaderSecret123456"}),
    Secret("env SSHPASS", "sshpassSecret99", env={"SSHPASS": "sshpassSecret99"}),
    Secret("env GPG_PASSPHRASE", "correct horse battery staple", env={"GPG_PASSPHRASE": "correct horse battery staple"}),
    Secret("env SLACK_WEBHOOK_URL", "slackWebhookSecret0123",
           env={"SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T0SLACKT/B0SLACKB/slackWebhookSecret0123"}),
    Secret("env AZURE_STORAGE_CONNECTION_STRING", "azureAccountKey0123456789+/abcDEF==",
           env={"AZURE_STORAGE_CONNECTION_STRING": _AZURE_CONN}),
    Secret("env HTTPS_PROXY with :pw@", "proxyPassw0rd", env={"HTTPS_PROXY": "http://:proxyPassw0rd@proxy.corp:3128"}),
    Secret("env HF_TOKEN", "hf_EnvTokenAbcdefghijklmnopqrstuvwxyz12", env={"HF_TOKEN": "hf_EnvTokenAbcdefghijklmnopqrstuvwxyz12"}),
    Secret("env HF_HUB_TOKEN (allow-listed prefix)", "hf_HubTokenAbcdefghijklmnopqrstuvwxyz34",
           env={"HF_HUB_TOKEN": "hf_HubTokenAbcdefghijklmnopqrstuvwxyz34"}),
    Secret("env WANDB_API_KEY (40 hex)", "0123456789abcdef0123456789abcdef01234567",
           env={"WANDB_API_KEY": "0123456789abcdef0123456789abcdef01234567"}),
    Secret("env AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
           env={"AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}),
    Secret("env AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE", env={"AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE"}),
    Secret("env AWS_SESSION_TOKEN", "FwoGZXIvYXdzEBYaDsessionTokenValue123",
           env={"AWS_SESSION_TOKEN": "FwoGZXIvYXdzEBYaDsessionTokenValue123"}),
    Secret("env OPENAI_API_KEY sk-proj-", "sk-proj-abcdefghijklmnopqrstuvwxyzABCD1234",
           env={"OPENAI_API_KEY": "sk-proj-abcdefghijklmnopqrstuvwxyzABCD1234"}),
    Secret("env ANTHROPIC_API_KEY sk-ant-", "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123",
           env={"ANTHROPIC_API_KEY": "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123"}),
    Secret("env GITLAB_TOKEN glpat-", "glpat-abcdefghij0123456789", env={"GITLAB_TOKEN": "glpat-abcdefghij0123456789"}),
    Secret("env SLACK_BOT_TOKEN xoxb-", "xoxb-123456789012-1234567890123-abcdefghijklmnopqrstuvwx",
           env={"SLACK_BOT_TOKEN": "xoxb-123456789012-1234567890123-abcdefghijklmnopqrstuvwx"}),
    Secret("env GOOGLE_API_KEY AIza", "AIzaSyA-abcdefghijklmnopqrstuvwxyz01234",
           env={"GOOGLE_API_KEY": "AIzaSyA-abcdefghijklmnopqrstuvwxyz01234"}),
    Secret("env PGPASSWORD", "pgPasswordSecret7", env={"PGPASSWORD": "pgPasswordSecret7"}),
    Secret("env MYSQL_PWD", "mysqlPwdSecret8", env={"MYSQL_PWD": "mysqlPwdSecret8"}),
    Secret("env DATABASE_URL user:pw@", "dbUrlPassw0rd", env={"DATABASE_URL": "postgres://app:dbUrlPassw0rd@db.internal:5432/prod"}),
    Secret("env REDIS_URL :pw@", "redisPassw0rd", env={"REDIS_URL": "redis://:redisPassw0rd@cache:6379/0"}),
    Secret("env SENTRY_DSN", "sentryPublicKey0123456789abcdef",
           env={"SENTRY_DSN": "https://sentryPublicKey0123456789abcdef@o123.ingest.sentry.io/456"}),
    Secret("env NPM_TOKEN npm_", "npm_abcdefghijklmnopqrstuvwxyz0123456789", env={"NPM_TOKEN": "npm_abcdefghijklmnopqrstuvwxyz0123456789"}),
    Secret("env PyPI token", "pypi-AgEIcHlwaS5vcmcCJGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6MDEy",
           env={"TWINE_PASSWORD": "pypi-AgEIcHlwaS5vcmcCJGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6MDEy"}),
    Secret("env Stripe sk_live_", "sk_live_abcdefghijklmnop0123", env={"STRIPE_SECRET_KEY": "sk_live_abcdefghijklmnop0123"}),
    Secret("env JWT under an innocent name", "jwtSignaturePartXyz0123456789abcdefABCDEF", env={"SESSION_INFO": _JWT}),
    Secret("env PEM private key", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQpemEnvBody", env={"DEPLOY_SSH_KEY": _PEM_ENV}),
    Secret("env Discord webhook", "discordWebhookSecretToken_abc",
           env={"ALERT_HOOK": "https://discord.com/api/webhooks/123456789012345678/discordWebhookSecretToken_abc"}),
    Secret("env ghp_ under an innocent name", "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
           env={"MY_NOTE": "ghp_abcdefghijklmnopqrstuvwxyz0123456789"}),
    Secret("env Telegram bot token", "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0",
           env={"BOT_CONFIG": "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0"}),
    Secret("env Databricks dapi", "dapi0123456789abcdef0123456789abcdef", env={"DATABRICKS_HOST_CFG": "dapi0123456789abcdef0123456789abcdef"}),
    Secret("env SendGrid SG.", "SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG",
           env={"MAIL_CFG": "SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG"}),
    Secret("env HF_ENDPOINT user:pw@ (allow-listed value)", "hfEndpointPassw0rd",
           env={"HF_ENDPOINT": "https://hfuser:hfEndpointPassw0rd@hub.internal"}),
    Secret("env TORCHINDUCTOR redis :pw@ (allow-listed value)", "inductorRedisPw99",
           env={"TORCHINDUCTOR_REDIS_URL": "redis://:inductorRedisPw99@redis.internal:6379"}),
    Secret("env Google OAuth ya29.", "ya29.a0AfH6SMBabcdefghijklmnopqrstuvwxyz", env={"GCLOUD_ACCESS": "ya29.a0AfH6SMBabcdefghijklmnopqrstuvwxyz"}),
    # --- the command line (the leaks of the issue first) ---
    Secret("argv --db-pass X", "dbPassArgSecret1", argv=("--db-pass", "dbPassArgSecret1")),
    Secret("argv --passphrase X", "passphraseArgSecret2", argv=("--passphrase", "passphraseArgSecret2")),
    Secret("argv -p X", "shortPArgSecret3", argv=("-p", "shortPArgSecret3")),
    Secret("argv -pX", "AttachedPwSecret9", argv=("-pAttachedPwSecret9",)),
    Secret("argv --tokenizer-token X", "tokenizerTokenSecret4", argv=("--tokenizer-token", "tokenizerTokenSecret4")),
    Secret("argv redis://:pw@host", "redisArgPw55", argv=("redis://:redisArgPw55@host:6379",)),
    Secret("argv presigned S3 URL", "s3PresignedSignature0123456789abcdef", argv=(_S3,)),
    Secret("argv presigned S3 credential", "s3CredentialPart0123", argv=("--url", _S3)),
    Secret("argv GCS signed URL", "gcsSignedSignature0123456789abcdef", argv=(_GCS,)),
    Secret("argv Azure SAS URL", "azureSasSignature0123456789", argv=(_SAS,)),
    Secret("argv basic-auth URL", "basicAuthPw77", argv=("https://alice:basicAuthPw77@example.com/data",)),
    Secret("argv --api-key=X", "apiKeyEqualsSecret5", argv=("--api-key=apiKeyEqualsSecret5",)),
    Secret("argv --token X", "tokenSpaceSecret6", argv=("--token", "tokenSpaceSecret6")),
    Secret("argv --password=X", "passwordEqualsSecret7", argv=("--password=passwordEqualsSecret7",)),
    Secret("argv --hf-token hf_", "hf_ArgvTokenAbcdefghijklmnopqrstuvwxyz1", argv=("--hf-token", "hf_ArgvTokenAbcdefghijklmnopqrstuvwxyz1")),
    Secret("argv --wandb-key (40 hex)", "89abcdef0123456789abcdef0123456789abcdef", argv=("--wandb-key", "89abcdef0123456789abcdef0123456789abcdef")),
    Secret("argv --aws-secret-access-key", "awsSecretArgValue0123", argv=("--aws-secret-access-key", "awsSecretArgValue0123")),
    Secret("argv -H Authorization: Bearer", "bearerHeaderSecret0123456", argv=("-H", "Authorization: Bearer bearerHeaderSecret0123456")),
    Secret("argv --client-secret", "clientSecretArg0123", argv=("--client-secret", "clientSecretArg0123")),
    Secret("argv PEM private key", "MIIEowIBAAKCAQEAargvPemSecretBody0123", argv=("--private-key-pem", _PEM_ARG)),
    Secret("argv NAME=secret (env style)", "inlineEnvAssign0123", argv=("DB_PASSWORD=inlineEnvAssign0123",)),
    Secret("argv ADO.NET connection string with a space", "connStrPassword 99",
           argv=("--conn", "Server=tcp:sql.internal,1433;Database=d;User ID=u;Password=connStrPassword 99;Encrypt=yes")),
    Secret("argv JWT positional", "jwtSignaturePartXyz0123456789abcdefABCDEF", argv=(_JWT,)),
    Secret("argv --db-url=mysql://root:pw@", "mysqlUrlPw88", argv=("--db-url=mysql://root:mysqlUrlPw88@db/app",)),
    Secret("argv --secret=X", "secretEqualsValue0", argv=("--secret=secretEqualsValue0",)),
    Secret("argv glpat- positional", "glpat-argvGitlabToken012345678", argv=("--gitlab", "glpat-argvGitlabToken012345678")),
    Secret("argv xoxp- positional", "xoxp-1234567890-argvSlackUserToken", argv=("--slack", "xoxp-1234567890-argvSlackUserToken")),
    Secret("argv --cookie", "cookieSessionSecret0123", argv=("--cookie", "session=cookieSessionSecret0123")),
    Secret("argv --x-api-key", "apiHeaderKeySecret0123", argv=("--x-api-key", "apiHeaderKeySecret0123")),
    Secret("argv --dsn", "dsnPw0123", argv=("--dsn", "postgresql://u:dsnPw0123@h/db")),
    Secret("argv secret with a quote and backslashes", 'quo"te\\back\\slashPw', argv=("--password", 'quo"te\\back\\slashPw')),
    Secret("argv token in a shell line", "shellLineToken0123", argv=("-c", "run --token shellLineToken0123 --fast")),
    Secret("argv Authorization: token (GitHub style)", "ghHeaderTokenValue0123", argv=("--header", "Authorization: token ghHeaderTokenValue0123")),
    # --- the app config the program publishes on its board ---
    Secret("config api_key", "configApiKeySecret0", config={"api_key": "configApiKeySecret0"}),
    Secret("config nested wandb.key", "nestedWandbKeySecret1", config={"wandb": {"key": "nestedWandbKeySecret1"}}),
    Secret("config db_url user:pw@", "configDbUrlPw2", config={"db_url": "postgres://u:configDbUrlPw2@h/db"}),
    Secret("config header list", "configBearerSecret34567", config={"headers": ["Authorization: Bearer configBearerSecret34567"]}),
    Secret("config hub_token hf_", "hf_ConfigTokenAbcdefghijklmnopqrstuvwx", config={"hub_token": "hf_ConfigTokenAbcdefghijklmnopqrstuvwx"}),
    Secret("config presigned S3 url", "configS3Signature0123456789",
           config={"dataset_url": _S3.replace("s3PresignedSignature0123456789abcdef", "configS3Signature0123456789")}),
    Secret("config numeric password", "86420975", config={"db": {"password": 86420975}}),
    Secret("config JSON text holding a password", "jsonTextPassword0", config={"extra": '{"password": "jsonTextPassword0"}'}),
    # --- more of the environment and the command line ---
    Secret("env DOCKER_AUTH_CONFIG (JSON)", "ZG9ja2VyOmRvY2tlckF1dGhQdzAxMjM=",
           env={"DOCKER_AUTH_CONFIG": '{"auths": {"registry.internal": {"auth": "ZG9ja2VyOmRvY2tlckF1dGhQdzAxMjM="}}}'}),
    Secret("env GOOGLE_CREDENTIALS (service account JSON)", "MIIEvgIBADANgcpCredentialsPemBody0123",
           env={"GOOGLE_CREDENTIALS": _GOOGLE_CREDENTIALS}),
    Secret("env PIP_INDEX_URL user:pw@", "pipIndexPassw0rd", env={"PIP_INDEX_URL": "https://ci:pipIndexPassw0rd@pypi.internal/simple"}),
    Secret("env TORCH_HOME holding a token (allow-listed value)", "hf_TorchHomeTokenAbcdefghijklmnopq1",
           env={"TORCH_HOME": "/data/hf_TorchHomeTokenAbcdefghijklmnopq1/torch"}),
    Secret("argv positional PEM key (starts with -----)", "MHcCAQEEIpositionalPemKeyBody0123456789",
           argv=(_PEM_POSITIONAL, "innocent-after-pem"), keep=("innocent-after-pem",)),
    Secret("argv clone URL with x-access-token", "ghs_cloneTokenAbcdefghij0123456789",
           argv=("https://x-access-token:ghs_cloneTokenAbcdefghij0123456789@github.com/org/repo.git",)),
    Secret("argv mongodb+srv://user:pw@", "mongoSrvPassw0rd", argv=("mongodb+srv://app:mongoSrvPassw0rd@cluster0.mongodb.net/db",)),
    Secret("argv --proxy http://user:pw@", "proxyArgPassw0rd", argv=("--proxy", "http://me:proxyArgPassw0rd@proxy.corp:8080")),
    Secret("argv --hf_token=hf_ (underscores)", "hf_UnderscoreOptTokenAbcdefghijklmnop2",
           argv=("--hf_token=hf_UnderscoreOptTokenAbcdefghijklmnop2",)),
    # --- the third pass's forms: URL passwords with / or #, every cookie, %-encoded Bearer, glued names, Java and
    # Windows option syntax ---
    Secret("argv s3://AKIA...:SECRET/with/slashes@bucket", "s3UrlSecret/K7MDENG+bPxRf0123",
           argv=("--data", "s3://AKIAIOSFODNN7EXAMPLE:s3UrlSecret/K7MDENG+bPxRf0123@bucket/shards")),
    Secret("env s3://AKIA...:SECRET/...@bucket under an innocent name", "envS3UrlSecret/abcDEF0123",
           env={"DATA_URI": "s3://AKIAIOSFODNN7EXAMPLE:envS3UrlSecret/abcDEF0123@bucket/x"},
           thread="reader envS3UrlSecret/abcDEF0123"),
    Secret("argv URL password with #", "hashPass#word0123", argv=("https://bob:hashPass#word0123@example.com/data",)),
    Secret("argv URL password with ? and /", "qmarkPass?wo/rd0123", argv=("ftp://ann:qmarkPass?wo/rd0123@files.corp/in",)),
    Secret("argv the second cookie of a Cookie header", "secondCookieSession0123",
           argv=("-H", "Cookie: theme=dark; sessionid=secondCookieSession0123")),
    Secret("argv Bearer credential with % (what follows the first %)", "pctTailBearerSecret0123",
           argv=("--header", "Authorization: Bearer pctHead%2FpctTailBearerSecret0123")),
    Secret("argv --authtoken (glued)", "authtokenGluedSecret1", argv=("--authtoken", "authtokenGluedSecret1")),
    Secret("argv --dbpassword= (glued)", "dbpasswordGluedSecret2", argv=("--dbpassword=dbpasswordGluedSecret2",)),
    Secret("argv --hftoken (glued)", "hftokenGluedSecret3", argv=("--hftoken", "hftokenGluedSecret3")),
    Secret("argv -Dpassword=X (Java property)", "javaPropertySecret4", argv=("-Dpassword=javaPropertySecret4",)),
    Secret("argv -Ddb.password=X (Java property)", "javaDbPropertySecret5", argv=("-Ddb.password=javaDbPropertySecret5",)),
    Secret("argv --password:X (colon)", "colonPasswordSecret6", argv=("--password:colonPasswordSecret6",)),
    # --- names the program chooses: threads ---
    Secret("thread hf_", "hf_ThreadTokenAbcdefghijklmnopqrstu1", thread="loader-hf_ThreadTokenAbcdefghijklmnopqrstu1"),
    Secret("thread xoxp-", "xoxp-2222222222-threadSlackUserToken", thread="xoxp-2222222222-threadSlackUserToken"),
    Secret("thread ghp_", "ghp_threadGithubToken0123456789abcdef", thread="gh-ghp_threadGithubToken0123456789abcdef"),
    Secret("thread reusing an env password", "etlKnownPassw0rd", env={"ETL_DB_PASSWORD": "etlKnownPassw0rd"},
           thread="etl-etlKnownPassw0rd"),
    Secret("thread reusing an argv secret", "argvKnownTok0123", argv=("--sync-token", "argvKnownTok0123"),
           thread="sync argvKnownTok0123"),
    Secret("thread with a credentialed URL", "threadUrlPassw0rd", thread="fetch https://u:threadUrlPassw0rd@host/x"),
    # --- functions ---
    Secret("function hf_", "hf_FuncTokenAbcdefghijklmnopqrstu2", function="fetch_hf_FuncTokenAbcdefghijklmnopqrstu2"),
    Secret("function reusing an env secret", "funcKnownApiKey0123", env={"FUNC_API_KEY": "funcKnownApiKey0123"},
           function="call_funcKnownApiKey0123"),
    Secret("function xoxb-", "xoxb-333333333333-funcSlackBotToken0", function="xoxb-333333333333-funcSlackBotToken0"),
    Secret("function sk-", "sk-funcOpenaiKeyAbcdefghijklmnop0123", function="sk-funcOpenaiKeyAbcdefghijklmnop0123"),
    # --- file paths ---
    Secret("file in a hf_ directory", "hf_FileTokenAbcdefghijklmnopqrst3", directory="hf_FileTokenAbcdefghijklmnopqrst3"),
    Secret("file in a directory named after an env password", "dataDirPassw0rd", env={"DATA_PASSWORD": "dataDirPassw0rd"},
           directory="dataDirPassw0rd"),
    Secret("file in a glpat- directory", "glpat-fileGitlabToken0123456789", directory="glpat-fileGitlabToken0123456789"),
    Secret("file in an AKIA directory", "AKIAFILEDIRKEY000001", directory="AKIAFILEDIRKEY000001"),
    # --- queues (names on the board, in trace counters, in wandb metric keys) ---
    Secret("queue hf_", "hf_QueueTokenAbcdefghijklmnopqrstuv4", queue="q_hf_QueueTokenAbcdefghijklmnopqrstuv4"),
    Secret("queue named after an env secret", "queueEnvSecret0123", env={"QUEUE_SECRET": "queueEnvSecret0123"},
           queue="queueEnvSecret0123"),
    Secret("queue named after an argv secret", "queueArgvPassw0rd", argv=("--queue-password", "queueArgvPassw0rd"),
           queue="in-queueArgvPassw0rd"),
    Secret("queue sk-", "sk-queueKeyAbcdefghijklmnopqrst0123", queue="sk-queueKeyAbcdefghijklmnopqrst0123"),
    Secret("queue xoxb-", "xoxb-444444444444-queueSlackToken0", queue="xoxb-444444444444-queueSlackToken0"),
    Secret("queue with a URL password", "queueRedisPassw0rd", queue="redis://:queueRedisPassw0rd@cache/0"),
    # --- a dead thread's exception, on stderr ---
    Secret("exception with a URL password", "stderrUrlPassw0rd",
           exception="GET https://svc:stderrUrlPassw0rd@api.internal/v1 failed"),
    Secret("exception with an sk- key", "sk-stderrKeyAbcdefghijklmnop0123456789",
           exception="invalid key sk-stderrKeyAbcdefghijklmnop0123456789"),
    Secret("exception in a thread named with a token", "hf_DeadThreadTokenAbcdefghijklmno5",
           thread="uploader-hf_DeadThreadTokenAbcdefghijklmno5", exception="upload failed"),
    Secret("exception with an env password", "stderrEnvPassw0rd", env={"SERVICE_PASSWORD": "stderrEnvPassw0rd"},
           exception="login failed for stderrEnvPassw0rd"),
    Secret("exception with a Bearer header", "stderrBearerTok0123456",
           exception="401 for Authorization: Bearer stderrBearerTok0123456"),
    Secret("exception with password= in a query", "stderrQueryPassw0rd",
           exception="GET /login?user=a&password=stderrQueryPassw0rd failed"),
    Secret("exception with a PEM key across lines", "MIIEvQIBADANstderrPemBody0123abcdef", exception=_PEM_EXCEPTION),
)

# Values that look like secrets by name or shape but are what a maintainer needs: they must stay.
LOOKALIKE_CONFIG: dict[str, Any] = {
    "mask_token_id": 151669,
    "tokens_per_s_target": 21500.5,
    "tokenizer": "Qwen/Qwen3-8B",
    "pad_token": "<|endoftext|>",
    "num_key_value_heads": 4,
    "sort_key": "length",
    "max_tokens": 4096,
    "author": "alice",
    "signature_version": "s3v4",
    "hf_transfer": "hf_transfer",
}
LOOKALIKE_ARGV: tuple[str, ...] = (
    "--tokenizer", "Qwen/Qwen3-8B", "--mask-token-id", "151669", "--num-passes", "3", "--max-tokens", "4096",
    "--sort-key", "length", "git@github.com:org/repo.git", "https://huggingface.co/Qwen/Qwen3-8B", "--lr=3e-4",
)
# Names a program chooses that only look like secrets: they stay readable wherever they are shown.
LOOKALIKE_THREAD = "tokenizer-0"
LOOKALIKE_FUNCTION = "sort_key_fn"
LOOKALIKE_FILE = "hf_transfer_utils.py"
LOOKALIKE_QUEUES = ("pad_token_q", "tokens_per_s_q")
LOOKALIKE_ENV: dict[str, str] = {
    "CUDA_VISIBLE_DEVICES": "0",
    "OMP_NUM_THREADS": "4",
    "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
    "TOKENIZERS_PARALLELISM": "false",
    "HF_HOME": "/data/hf-cache",
    "NCCL_DEBUG": "INFO",
    "PYTHONHASHSEED": "0",
    "TORCH_LOGS": "recompiles",
}


def all_env() -> dict[str, str]:
    out = dict(LOOKALIKE_ENV)
    for s in SECRETS:
        out.update(s.env)
    return out


def all_argv() -> list[str]:
    out = list(LOOKALIKE_ARGV)
    for s in SECRETS:
        out.extend(s.argv)
    return out


def all_config() -> dict[str, Any]:
    out: dict[str, Any] = dict(LOOKALIKE_CONFIG)
    for s in SECRETS:
        out.update(s.config)
    return out


def all_plants(code_dir: Path) -> dict[str, Any]:
    """What the workload names (its ``--plant-json``): one worker thread per row of threads, functions and files
    (a form's name, else a plain one), the queues, the threads that die; and the look-alikes."""
    threads = [s.thread for s in SECRETS if s.thread and not s.exception]
    functions = [s.function for s in SECRETS if s.function]
    directories = [s.directory for s in SECRETS if s.directory]
    workers = [{"thread": threads[i] if i < len(threads) else f"plain-worker-{i}",
                "function": functions[i] if i < len(functions) else "step",
                "file": str(code_dir / (directories[i] if i < len(directories) else f"plain-{i}") / "worker.py")}
               for i in range(max(len(threads), len(functions), len(directories)))]
    workers.append({"thread": LOOKALIKE_THREAD, "function": LOOKALIKE_FUNCTION,
                    "file": str(code_dir / "lib" / LOOKALIKE_FILE)})
    deaths = [{"thread": s.thread or f"dying-{i}", "message": s.exception}
              for i, s in enumerate(SECRETS) if s.exception]
    return {"workers": workers, "queues": [*(s.queue for s in SECRETS if s.queue), *LOOKALIKE_QUEUES],
            "deaths": deaths}
