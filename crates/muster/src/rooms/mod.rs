//! Rooms: authoritative matches created over HTTP, in the spirit of Hathora's flow:
//! a game creates a room of a registered handler with a capacity, each player asks where it
//! lives (host, port, transport, and a join ticket of their own), connects — over the native TCP
//! transport (`crate::net::tcp`) or the WebSocket — and plays. An empty room ends after
//! `matches.empty_timeout_ms`; its creator (or a server holding `rooms.admin_key`) may destroy it
//! sooner.
//!
//! A room *is* an authoritative match: its id is the match id, and players on TCP and on
//! WebSocket are members of the same match.

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub mod config;
pub mod fleet;

use self::config::RoomsConfig;
use self::fleet::process::Stop;
use self::fleet::{Fleet, FleetRoom};
use crate::matches::authoritative::{AuthoritativeHandle, RoomMeta};
use crate::matches::error::MatchError;
use crate::matches::handler::MatchParams;
use crate::matches::id::MatchId;
use crate::matches::join_tokens::JoinClaims;
use crate::matches::registry::MatchRef;
use crate::matches::remote::RoomAsk;
pub use crate::matches::remote::RoomCaller;
use crate::matches::Matches;

/// The rooms service: rooms of the built-in handlers (authoritative matches of this node) and
/// of the studio's game servers (the [`fleet`]), with the connection info and tickets players
/// use to get in, on whichever node of the cluster a room lives.
pub struct Rooms {
    matches: Arc<Matches>,
    /// The studio's game servers run as rooms, when `[fleet.servers]` names any.
    pub fleet: Option<Arc<Fleet>>,
    config: RoomsConfig,
    /// In a cluster, the host this node is reached at (`cluster.advertise` without its port):
    /// a room's connection info names it, not the load balancer the player called.
    advertised_host: Option<String>,
}

/// `POST /v2/rooms` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateRoom {
    /// A registered match handler, e.g. `arena`.
    pub handler: String,
    /// Most players at once.
    pub capacity: u32,
    /// Free parameters for the handler.
    #[serde(default)]
    pub params: HashMap<String, String>,
}

/// A room as the API shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RoomInfo {
    pub room_id: String,
    pub handler: String,
    pub capacity: usize,
    pub players: usize,
    pub tick_rate_hz: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The creating user; absent for rooms created with the admin key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    pub created_at_ms: i64,
}

/// `GET /v2/rooms/{id}/connection` answer: where the room lives and a ticket to get in.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConnectionInfo {
    pub room_id: String,
    /// `tcp` (the native transport) or `websocket` when TCP is disabled.
    pub transport: String,
    pub host: String,
    pub port: u16,
    /// The join token: the first frame on TCP is `match_join { token }`; on the WebSocket,
    /// `match_join { token }` too (or `match_join { match_id }`).
    pub ticket: String,
    /// Unix seconds after which the ticket is refused.
    pub ticket_expires_at: i64,
    /// The WebSocket path, for clients that prefer it.
    pub websocket_path: String,
    /// The ENet (reliable UDP) transport, when it is on: same host, this UDP port, same ticket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enet: Option<Endpoint>,
}

/// Where a transport listens.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
}

impl RoomInfo {
    fn of(room: &AuthoritativeHandle) -> RoomInfo {
        let meta = room.room.as_ref();
        RoomInfo {
            room_id: room.id_text.clone(),
            handler: room.handler.clone(),
            capacity: room.capacity,
            players: room.size(),
            tick_rate_hz: room.tick_rate_hz(),
            label: room.label(),
            owner: meta.and_then(|m| m.owner).map(|u| u.to_string()),
            created_at_ms: meta.map_or(0, |m| m.created_at_ms),
        }
    }
}

impl RoomInfo {
    /// A room of the fleet (a game server process, or one allocated from Agones).
    fn of_fleet(room: &FleetRoom) -> RoomInfo {
        RoomInfo {
            room_id: room.room.room_id.clone(),
            handler: room.handler.clone(),
            capacity: room.room.capacity as usize,
            players: room.players,
            tick_rate_hz: 0,
            label: None,
            owner: room.room.owner.map(|u| u.to_string()),
            created_at_ms: room.room.created_at_ms,
        }
    }
}

impl Rooms {
    /// The rooms service over `matches`, with `fleet` when the studio's game servers run here;
    /// `advertised_host` is the cluster's name for this node's host, when it is in one.
    pub fn new(
        matches: Arc<Matches>,
        fleet: Option<Arc<Fleet>>,
        config: RoomsConfig,
        advertised_host: Option<String>,
    ) -> Arc<Rooms> {
        let rooms = Arc::new(Rooms {
            matches,
            fleet,
            config,
            advertised_host,
        });
        rooms.matches.set_room_answers(rooms.clone());
        rooms
    }

    /// Starts the fleet's supervision, when there is a fleet.
    pub fn start(&self) {
        if let Some(fleet) = &self.fleet {
            fleet.start();
        }
    }

    /// A new room: an authoritative match of a built-in handler, or a process of the fleet
    /// (which may wait for one).
    pub async fn create_room(
        &self,
        caller: &RoomCaller,
        request: CreateRoom,
    ) -> Result<RoomInfo, MatchError> {
        let limits = &self.config;
        if request.capacity == 0 || request.capacity > limits.max_capacity {
            return Err(MatchError::BadInput(format!(
                "capacity must be between 1 and {}.",
                limits.max_capacity
            )));
        }
        if request.params.len() > 32
            || request
                .params
                .iter()
                .any(|(k, v)| k.len() > 128 || v.len() > 1024)
        {
            return Err(MatchError::BadInput(
                "params: at most 32 entries, keys up to 128 bytes, values up to 1024.".into(),
            ));
        }
        let owner = match caller {
            RoomCaller::Player { user_id, .. } => Some(*user_id),
            RoomCaller::Admin => None,
        };
        if let Some(fleet) = self.fleet_serving(&request.handler) {
            if let Some(owner) = owner {
                // The creation rate; the fleet bounds its own servers.
                self.matches.rooms.reserve(owner)?;
                self.matches.rooms.cancel(owner);
            }
            let room = fleet
                .create_room(&request.handler, request.capacity, owner, request.params)
                .await?;
            return Ok(RoomInfo::of_fleet(&room));
        }
        if self.matches.metrics.rooms.get() as usize >= limits.max_rooms {
            return Err(MatchError::Rejected(
                "Too many rooms on this server; try later.".into(),
            ));
        }
        if let Some(owner) = owner {
            self.matches.rooms.reserve(owner)?;
        }
        let params = MatchParams {
            capacity: request.capacity as usize,
            params: request.params,
            ..Default::default()
        };
        let created = self.matches.create_authoritative(
            &request.handler,
            params,
            Some(RoomMeta {
                owner,
                created_at_ms: crate::base::clock::now_ms(),
            }),
        );
        match created {
            Ok(room) => Ok(RoomInfo::of(&room)),
            Err(error) => {
                if let Some(owner) = owner {
                    self.matches.rooms.cancel(owner);
                }
                Err(error)
            }
        }
    }

    /// A room's info, from whichever node it lives on.
    pub async fn room_info_anywhere(&self, id: &str) -> Result<RoomInfo, MatchError> {
        match self.matches.elsewhere(id)? {
            Some((link, owner)) => {
                let ask = RoomAsk::Info { id: id.to_string() };
                crate::matches::remote::from_answer(link.room(&owner, &ask).await?)
            }
            None => self.room_info(id),
        }
    }

    /// Connection info for a room on whichever node it lives on: the ticket is that node's,
    /// and so is the address.
    pub async fn connection_anywhere(
        &self,
        caller: &RoomCaller,
        id: &str,
        request_host: &str,
        http_port: u16,
    ) -> Result<ConnectionInfo, MatchError> {
        match self.matches.elsewhere(id)? {
            Some((link, owner)) => {
                let ask = RoomAsk::Connection {
                    id: id.to_string(),
                    caller: caller.clone(),
                    request_host: request_host.to_string(),
                };
                crate::matches::remote::from_answer(link.room(&owner, &ask).await?)
            }
            None => self.connection(caller, id, request_host, http_port),
        }
    }

    /// Destroys a room on whichever node it lives on.
    pub async fn destroy_room_anywhere(
        &self,
        caller: &RoomCaller,
        id: &str,
    ) -> Result<(), MatchError> {
        match self.matches.elsewhere(id)? {
            Some((link, owner)) => {
                let ask = RoomAsk::Destroy {
                    id: id.to_string(),
                    caller: caller.clone(),
                };
                link.room(&owner, &ask).await.map(|_| ())
            }
            None => self.destroy_room(caller, id).await,
        }
    }

    /// Redeems a player's ticket for room `id`: a game server (calling with `rooms.admin_key`)
    /// learns who connected to it. Once per ticket, like a join.
    pub fn redeem_ticket(
        &self,
        caller: &RoomCaller,
        id: &str,
        ticket: &str,
    ) -> Result<JoinClaims, MatchError> {
        if !matches!(caller, RoomCaller::Admin) {
            return Err(MatchError::Forbidden(
                "Only a game server (with rooms.admin_key) may redeem tickets.".into(),
            ));
        }
        let (room, _) = MatchId::parse_any(id)?;
        let claims = self.matches.tokens.verify(ticket)?;
        if claims.mid != room.uuid {
            return Err(MatchError::BadInput(
                "The ticket is for another room.".into(),
            ));
        }
        self.matches.tokens.consume(&claims)?;
        Ok(claims)
    }

    /// The live room with this id.
    pub fn room(&self, id: &str) -> Result<Arc<AuthoritativeHandle>, MatchError> {
        let id = MatchId::parse(id, self.matches.node())?;
        match self.matches.registry.get(id)? {
            MatchRef::Authoritative(room) if room.room.is_some() => Ok(room),
            _ => Err(MatchError::NotFound("Room not found.".into())),
        }
    }

    pub fn room_info(&self, id: &str) -> Result<RoomInfo, MatchError> {
        if let Some(room) = self.fleet_room(id)? {
            return Ok(RoomInfo::of_fleet(&room));
        }
        self.room(id).map(|r| RoomInfo::of(&r))
    }

    /// The fleet, when it runs game servers called `handler`.
    fn fleet_serving(&self, handler: &str) -> Option<&Fleet> {
        self.fleet.as_deref().filter(|f| f.serves(handler))
    }

    /// The room `id` when it is one of the fleet's.
    /// The latest output (standard output and error) of the game server process serving room
    /// `id`, when it is a room of this node's fleet; `None` for any other room.
    pub fn room_output(&self, id: &str) -> Result<Option<String>, MatchError> {
        Ok(self
            .fleet_room(id)?
            .and_then(|room| room.server)
            .map(|server| server.output()))
    }

    fn fleet_room(&self, id: &str) -> Result<Option<FleetRoom>, MatchError> {
        match &self.fleet {
            Some(fleet) => fleet.room(id),
            None => Ok(None),
        }
    }

    /// A page of up to `limit` rooms, optionally of one handler, oldest first, after `cursor`
    /// (the previous page's). It reads the room book, never the whole match map. The fleet's
    /// rooms (as many as its servers, bounded by its own settings) come on the first page.
    pub fn list_rooms(
        &self,
        handler: Option<&str>,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<(Vec<RoomInfo>, Option<String>), MatchError> {
        let first_page = cursor.is_none_or(str::is_empty);
        let page = self.matches.rooms.page(handler, cursor, limit)?;
        let mut rooms: Vec<RoomInfo> = page
            .ids
            .iter()
            .filter_map(|id| self.room(id).ok())
            .map(|room| RoomInfo::of(&room))
            .collect();
        if let (true, Some(fleet)) = (first_page, &self.fleet) {
            let more = limit.saturating_sub(rooms.len());
            let mut fleet_rooms: Vec<RoomInfo> = fleet
                .rooms(handler, more)
                .iter()
                .map(RoomInfo::of_fleet)
                .collect();
            fleet_rooms.append(&mut rooms);
            rooms = fleet_rooms;
        }
        Ok((rooms, page.cursor))
    }

    /// Ends a room; only its creator or the admin key may. Answers once the room is gone from
    /// every route (its match has ended and left the registry and the room book).
    pub async fn destroy_room(&self, caller: &RoomCaller, id: &str) -> Result<(), MatchError> {
        let creator_only = |owner: Option<Uuid>| match caller {
            RoomCaller::Player { user_id, .. } if owner != Some(*user_id) => Err(
                MatchError::Forbidden("Only the room's creator may destroy it.".into()),
            ),
            _ => Ok(()),
        };
        if let Some(room) = self.fleet_room(id)? {
            creator_only(room.room.owner)?;
            let Some(server) = room.server else {
                return Err(MatchError::BadInput(
                    "An Agones game server ends its room itself (its SDK's Shutdown).".into(),
                ));
            };
            server.stop(Stop::Stopped, "its room was destroyed");
            return Ok(());
        }
        let room = self.room(id)?;
        creator_only(room.room.as_ref().and_then(|m| m.owner))?;
        room.terminate();
        room.ended.cancelled().await;
        Ok(())
    }

    /// Connection info with a ticket for the calling player. `request_host` is the host the
    /// client reached the API on, used when neither `rooms.public_host` nor (in a cluster)
    /// `cluster.advertise` names one.
    pub fn connection(
        &self,
        caller: &RoomCaller,
        id: &str,
        request_host: &str,
        http_port: u16,
    ) -> Result<ConnectionInfo, MatchError> {
        let RoomCaller::Player { user_id, username } = caller else {
            return Err(MatchError::BadInput(
                "A ticket is issued to a player: call with the player's session token.".into(),
            ));
        };
        let config = &self.config;
        // The room lives on this node: its configured public host, else the address it
        // advertises to the cluster, else the host the client called (a single node).
        let host = if !config.public_host.is_empty() {
            config.public_host.clone()
        } else if let Some(advertised) = &self.advertised_host {
            advertised.clone()
        } else {
            request_host.to_owned()
        };
        if let Some(room) = self.fleet_room(id)? {
            // Players connect to the game server itself, on its own port (and, allocated from
            // Agones, at its own address).
            let (room_id, _) = MatchId::parse_any(&room.room.room_id)?;
            let (ticket, expires) = self.matches.tokens.issue(room_id, *user_id, username);
            return Ok(ConnectionInfo {
                room_id: room.room.room_id,
                transport: "tcp".into(),
                host: room.host.unwrap_or(host),
                port: room.port,
                enet: None,
                ticket,
                ticket_expires_at: expires,
                websocket_path: String::new(),
            });
        }
        let room = self.room(id)?;
        let (ticket, expires) = self.matches.tokens.issue(room.id, *user_id, username);
        let (transport, port) = match self.matches.tcp_addr() {
            Some(addr) => (
                "tcp",
                if config.public_port == 0 {
                    addr.port()
                } else {
                    config.public_port
                },
            ),
            None => ("websocket", http_port),
        };
        let enet = self.matches.enet_port().map(|port| Endpoint {
            host: host.clone(),
            port,
        });
        Ok(ConnectionInfo {
            room_id: room.id_text.clone(),
            transport: transport.into(),
            host,
            port,
            enet,
            ticket,
            ticket_expires_at: expires,
            websocket_path: "/ws".into(),
        })
    }
}

#[async_trait::async_trait]
impl crate::matches::remote::RoomAnswers for Rooms {
    /// Answers another node's rooms call about a room of this node.
    async fn answer(&self, ask: RoomAsk) -> Result<serde_json::Value, MatchError> {
        let value = match ask {
            RoomAsk::Info { id } => serde_json::to_value(self.room_info(&id)?),
            RoomAsk::Connection {
                id,
                caller,
                request_host,
            } => {
                // The player reaches this node, not the one it called: this node's HTTP port
                // (for a WebSocket room), its host as configured or advertised.
                let port = self.matches.http_port().unwrap_or(80);
                serde_json::to_value(self.connection(&caller, &id, &request_host, port)?)
            }
            RoomAsk::Destroy { id, caller } => {
                self.destroy_room(&caller, &id).await?;
                Ok(serde_json::Value::Null)
            }
            other => return self.matches.answer_match(other).await,
        };
        value.map_err(|e| MatchError::Rejected(format!("Unencodable answer: {e}")))
    }
}
