-- The tables of a promlib database written by the release at commit
-- ccdae86 (tools/oldrelease/gen.go), dumped by pg_dump --no-owner
-- --no-privileges --inserts, without schema names and session settings:
-- run it with the search_path of the schema to fill.

--
-- PostgreSQL database dump
--


-- Dumped from database version 15.18 (Debian 15.18-0+deb12u1)
-- Dumped by pg_dump version 15.18 (Debian 15.18-0+deb12u1)




--
-- Name: promlib_cursors; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE promlib_cursors (
    topic text NOT NULL,
    grp text NOT NULL,
    part integer NOT NULL,
    seq bigint NOT NULL
);


--
-- Name: promlib_events; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE promlib_events (
    topic text NOT NULL,
    seq bigint NOT NULL,
    id text NOT NULL,
    ts bigint NOT NULL,
    rkey text NOT NULL,
    part integer NOT NULL,
    headers text,
    payload bytea NOT NULL,
    content_type text NOT NULL,
    caused_by text,
    tags text,
    sid text NOT NULL
);


--
-- Name: promlib_group_state; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE promlib_group_state (
    topic text NOT NULL,
    grp text NOT NULL,
    part integer NOT NULL,
    seq bigint NOT NULL,
    v integer NOT NULL
);


--
-- Name: promlib_groups; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE promlib_groups (
    topic text NOT NULL,
    grp text NOT NULL
);


--
-- Name: promlib_leases; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE promlib_leases (
    topic text NOT NULL,
    grp text NOT NULL,
    part integer NOT NULL,
    member text NOT NULL,
    expires bigint NOT NULL
);


--
-- Name: promlib_members; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE promlib_members (
    topic text NOT NULL,
    grp text NOT NULL,
    member text NOT NULL,
    expires bigint NOT NULL,
    left_at bigint NOT NULL
);


--
-- Name: promlib_topics; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE promlib_topics (
    topic text NOT NULL,
    head bigint NOT NULL,
    floor bigint NOT NULL,
    events bigint DEFAULT 0 NOT NULL,
    bytes bigint DEFAULT 0 NOT NULL
);


--
-- Data for Name: promlib_cursors; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO promlib_cursors VALUES ('orders', 'g', 6, 8);
INSERT INTO promlib_cursors VALUES ('orders', 'g', 7, 16);
INSERT INTO promlib_cursors VALUES ('orders', 'g', 0, 16);
INSERT INTO promlib_cursors VALUES ('orders', 'g', 1, 1);
INSERT INTO promlib_cursors VALUES ('orders', 'g', 2, 16);
INSERT INTO promlib_cursors VALUES ('orders', 'g', 3, 16);
INSERT INTO promlib_cursors VALUES ('orders', 'g', 4, 16);
INSERT INTO promlib_cursors VALUES ('orders', 'g', 5, 16);
INSERT INTO promlib_cursors VALUES ('orders', 'dl', 4, 16);
INSERT INTO promlib_cursors VALUES ('orders', 'dl', 5, 16);
INSERT INTO promlib_cursors VALUES ('orders', 'dl', 6, 16);
INSERT INTO promlib_cursors VALUES ('orders', 'dl', 7, 16);
INSERT INTO promlib_cursors VALUES ('orders', 'dl', 0, 16);
INSERT INTO promlib_cursors VALUES ('orders', 'dl', 1, 16);
INSERT INTO promlib_cursors VALUES ('orders', 'dl', 2, 16);
INSERT INTO promlib_cursors VALUES ('orders', 'dl', 3, 16);


--
-- Data for Name: promlib_events; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO promlib_events VALUES ('orders', 1, 'orders-01', 1767225600001, 'k0', 6, NULL, '\x7b226e223a317d', '', NULL, NULL, '');
INSERT INTO promlib_events VALUES ('orders', 2, 'orders-02', 1767225600002, 'k1', 1, NULL, '\x7b226e223a327d', '', NULL, NULL, '');
INSERT INTO promlib_events VALUES ('orders', 3, 'orders-03', 1767225600003, 'k2', 0, NULL, '\x7b226e223a337d', '', NULL, NULL, '');
INSERT INTO promlib_events VALUES ('orders', 4, 'orders-04', 1767225600004, 'k3', 3, NULL, '\x7b226e223a347d', '', NULL, NULL, '');
INSERT INTO promlib_events VALUES ('orders', 5, 'orders-05', 1767225600005, 'k4', 2, NULL, '\x7b226e223a357d', '', NULL, NULL, '');
INSERT INTO promlib_events VALUES ('orders', 6, 'orders-06', 1767225600006, 'k5', 5, NULL, '\x7b226e223a367d', '', NULL, NULL, '');
INSERT INTO promlib_events VALUES ('orders', 7, 'orders-07', 1767225600007, 'k6', 4, NULL, '\x7b226e223a377d', '', NULL, NULL, '');
INSERT INTO promlib_events VALUES ('orders', 8, 'orders-08', 1767225600008, 'k7', 7, NULL, '\x7b226e223a387d', '', NULL, NULL, '');
INSERT INTO promlib_events VALUES ('orders', 9, 'orders-09', 1767225600009, 'k0', 6, NULL, '\x7b226e223a397d', '', NULL, NULL, '');
INSERT INTO promlib_events VALUES ('orders', 10, 'orders-10', 1767225600010, 'k1', 1, NULL, '\x7b226e223a31307d', '', NULL, NULL, '');
INSERT INTO promlib_events VALUES ('orders', 11, 'orders-11', 1767225600011, 'k2', 0, NULL, '\x7b226e223a31317d', '', NULL, NULL, '');
INSERT INTO promlib_events VALUES ('orders', 12, 'orders-12', 1767225600012, 'k3', 3, NULL, '\x7b226e223a31327d', '', NULL, NULL, '');
INSERT INTO promlib_events VALUES ('orders', 13, 'orders-13', 1767225600013, 'k4', 2, NULL, '\x7b226e223a31337d', '', NULL, NULL, '');
INSERT INTO promlib_events VALUES ('orders', 14, 'orders-14', 1767225600014, 'k5', 5, NULL, '\x7b226e223a31347d', '', NULL, NULL, '');
INSERT INTO promlib_events VALUES ('orders', 15, 'orders-15', 1767225600015, 'k6', 4, NULL, '\x7b226e223a31357d', '', NULL, NULL, '');
INSERT INTO promlib_events VALUES ('orders', 16, 'orders-16', 1767225600016, 'k7', 7, NULL, '\x7b226e223a31367d', '', NULL, NULL, '');
INSERT INTO promlib_events VALUES ('idle', 1, 'idle-01', 1767225600101, 'i0', 4, NULL, '\x7b226e223a317d', '', NULL, NULL, '');
INSERT INTO promlib_events VALUES ('idle', 2, 'idle-02', 1767225600102, 'i1', 7, NULL, '\x7b226e223a327d', '', NULL, NULL, '');
INSERT INTO promlib_events VALUES ('idle', 3, 'idle-03', 1767225600103, 'i2', 2, NULL, '\x7b226e223a337d', '', NULL, NULL, '');
INSERT INTO promlib_events VALUES ('orders.dlq', 1, 'e6c6b8eb-d419-571c-a524-2b6efa9f7e95', 1795732105582, 'k4', 2, '{"x-dlq-attempts":"1","x-dlq-group":"dl","x-dlq-id":"orders-05","x-dlq-reason":"seq 5 fails","x-dlq-seq":"5","x-dlq-topic":"orders"}', '\x7b226e223a357d', '', '["orders-05"]', NULL, '');


--
-- Data for Name: promlib_group_state; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO promlib_group_state VALUES ('orders', 'g', 6, 9, 2);
INSERT INTO promlib_group_state VALUES ('orders', 'g', 1, 2, 2);
INSERT INTO promlib_group_state VALUES ('orders', 'g', 1, 10, -1);


--
-- Data for Name: promlib_groups; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO promlib_groups VALUES ('orders', 'g');
INSERT INTO promlib_groups VALUES ('orders', 'dl');


--
-- Data for Name: promlib_leases; Type: TABLE DATA; Schema: public; Owner: -
--



--
-- Data for Name: promlib_members; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO promlib_members VALUES ('orders', 'g', '764f09a7-ad57-49b3-b10d-731ac46ccd47/3', 1795732705626886337, 1795732105626886337);
INSERT INTO promlib_members VALUES ('orders', 'dl', '764f09a7-ad57-49b3-b10d-731ac46ccd47/4', 1795732705631261730, 1795732105631261730);


--
-- Data for Name: promlib_topics; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO promlib_topics VALUES ('orders', 16, 1, 16, 151);
INSERT INTO promlib_topics VALUES ('idle', 3, 1, 3, 27);
INSERT INTO promlib_topics VALUES ('orders.dlq', 1, 1, 1, 141);


--
-- Name: promlib_cursors promlib_cursors_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY promlib_cursors
    ADD CONSTRAINT promlib_cursors_pkey PRIMARY KEY (topic, grp, part);


--
-- Name: promlib_events promlib_events_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY promlib_events
    ADD CONSTRAINT promlib_events_pkey PRIMARY KEY (topic, seq);


--
-- Name: promlib_group_state promlib_group_state_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY promlib_group_state
    ADD CONSTRAINT promlib_group_state_pkey PRIMARY KEY (topic, grp, part, seq);


--
-- Name: promlib_groups promlib_groups_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY promlib_groups
    ADD CONSTRAINT promlib_groups_pkey PRIMARY KEY (topic, grp);


--
-- Name: promlib_leases promlib_leases_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY promlib_leases
    ADD CONSTRAINT promlib_leases_pkey PRIMARY KEY (topic, grp, part);


--
-- Name: promlib_members promlib_members_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY promlib_members
    ADD CONSTRAINT promlib_members_pkey PRIMARY KEY (topic, grp, member);


--
-- Name: promlib_topics promlib_topics_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY promlib_topics
    ADD CONSTRAINT promlib_topics_pkey PRIMARY KEY (topic);


--
-- Name: promlib_events_id; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX promlib_events_id ON promlib_events USING btree (topic, id);


--
-- Name: promlib_events_key; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX promlib_events_key ON promlib_events USING btree (topic, rkey, seq) WHERE (rkey <> ''::text);


--
-- PostgreSQL database dump complete
--


