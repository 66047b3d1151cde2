"""A run's credential as one persona session uses it: through Understudy's vault only.

When the persona calls `log_in`, the loop asks `SessionLogin.vault_ref()`: the password is
decrypted here, put into Understudy's vault as `su-<session id>` through the operator API, and
the loop types it with `fill_secret(ref, "vault:su-<session id>")`. The plaintext is a local
variable for the length of that call; the model only ever learns the credential's name and user
name. `clear()` deletes the vault secret when the session ends (every generation shares it).

If the service dies between the put and the delete, the secret stays sealed in Understudy's vault
until the session's next start puts it again and its end deletes it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from synthetic_users._store._credentials import CredentialNotFound

if TYPE_CHECKING:
    from synthetic_users._safety._credentials import Credentials
    from synthetic_users._store import RunRecord

log = logging.getLogger("synthetic_users.credentials")


class Vault(Protocol):
    """Understudy's vault, as the operator API offers it (`AsyncOperatorClient`)."""

    async def put_secret(self, tenant: str, name: str, value: str) -> None: ...

    async def delete_secret(self, tenant: str, name: str) -> bool: ...


class LoginUnavailable(Exception):
    """The run's credential cannot be used (deleted since, or the vault refused it)."""


class SessionLogin:
    """The credential of one persona session; the password stays out of everything it returns."""

    def __init__(
        self,
        credentials: Credentials,
        vault: Vault,
        tenant: str,
        run: RunRecord,
        session_id: str,
        *,
        name: str,
        username: str,
    ) -> None:
        self.name = name
        self.username = username
        self._credentials = credentials
        self._vault = vault
        self._tenant = tenant
        self._customer_id = run.customer_id
        self._credential_id = run.credential_id or ""
        self._secret = f"su-{session_id}"
        self._staged = False

    def __repr__(self) -> str:
        return f"SessionLogin({self.name!r}, username={self.username!r})"

    @property
    def secret_name(self) -> str:
        """The vault name (`su-<session id>`) the password is kept under during the session."""
        return self._secret

    async def vault_ref(self) -> str:
        """`vault:su-<session id>`, holding the password in Understudy's vault from now on.

        Raises:
            LoginUnavailable: the credential was deleted, or the vault refused the secret.
        """
        if not self._staged:
            try:
                password = self._credentials.reveal(self._customer_id, self._credential_id)
            except CredentialNotFound:
                raise LoginUnavailable("the study's account was deleted") from None
            try:
                await self._vault.put_secret(self._tenant, self._secret, password)
            except Exception as exc:
                # Never chain: a transport error's context could carry the request body.
                raise LoginUnavailable(
                    f"the browser's vault refused the password ({type(exc).__name__})"
                ) from None
            finally:
                del password
            self._staged = True
        return f"vault:{self._secret}"

    async def clear(self) -> None:
        """Delete the vault secret (when one was put); best effort, logged on failure."""
        if not self._staged:
            return
        try:
            await self._vault.delete_secret(self._tenant, self._secret)
            self._staged = False
        except Exception as exc:
            log.warning("vault secret %s not deleted: %s", self._secret, type(exc).__name__)


class LoginBroker:
    """Hands each persona session of a run with a credential its `SessionLogin`."""

    def __init__(self, credentials: Credentials, vault: Vault, tenant: str) -> None:
        self._credentials = credentials
        self._vault = vault
        self._tenant = tenant

    def for_session(self, run: RunRecord, session_id: str) -> SessionLogin | None:
        """None when the run has no credential, or it was deleted since the run was created."""
        if run.credential_id is None:
            return None
        try:
            record = self._credentials.get(run.customer_id, run.credential_id)
        except CredentialNotFound:
            log.warning("run %s names a deleted credential", run.run_id)
            return None
        return SessionLogin(
            self._credentials,
            self._vault,
            self._tenant,
            run,
            session_id,
            name=record.name,
            username=record.username,
        )
