"""The API's operations by group, each a mixin of `yoyaku_client.Client` over one
`Transport` (`base.ApiBase`)."""
